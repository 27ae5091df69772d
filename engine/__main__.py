from engine.server import exit_now, main

exit_now(main())
