from daemon.cli.main import main

raise SystemExit(main())
