from daemon.cli import main

raise SystemExit(main())
