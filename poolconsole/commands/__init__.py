"""The commands: one module per command, each with `add_parser(sub)` (its arguments, `func=run`) and
`run(args) -> int` (parse, call the runtime, a workflow or an op, print), as ui/screens/ draws.
`poolconsole.cli` assembles them into one parser and turns the shared failures into exit codes."""
