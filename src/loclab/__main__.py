from loclab.cli import main

raise SystemExit(main())
