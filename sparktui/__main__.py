from sparktui.cli import main

raise SystemExit(main())
