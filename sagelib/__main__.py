from sagelib.cli import main

raise SystemExit(main())
