"""Workflows: what puts live state and single steps together, once for every asker. The console confirms a
Plan and runs it in one worker, the commands print it and run it with --yes (or a yes at the terminal), and the
watcher can run it headless: no flow is written twice (STYLE.md, "A layout that fits").

Each workflow module has `plan(...) -> Plan` (what would run, or why it is refused) and `run(workspace, plan,
progress) -> Outcome`. Nothing here prints or imports Textual."""
