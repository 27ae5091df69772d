import os
import sys

if "--fork-server" in sys.argv[1:]:
    # before numpy loads OpenBLAS: its thread pool would make the fork server unable to fork
    # (engine.forkserver); every engine limits BLAS to one thread anyway (engine.cores)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

from engine.server import exit_now, main

exit_now(main())
