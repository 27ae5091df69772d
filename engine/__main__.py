from engine.server import main

raise SystemExit(main())
