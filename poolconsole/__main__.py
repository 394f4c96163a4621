from poolconsole.cli import main

raise SystemExit(main())
