from overlay_tool.cli import main

raise SystemExit(main())
