"""The `toposched` command line: one module per sub-command, each with a `main(argv) -> int`.

Owns the dispatcher (`main`: sub-command names and summaries, `toposched --help`), `run` (the
daemon process: assembles the log, the watches, the leader election, the loop and the endpoints),
`simulate`, `replay`, `topology`, `quota`, `validate`, `completion` (shell completion from the commands'
own parsers), and `demo` with its sample workload (`demo_workload`); `exits` holds the exit codes and
the one-line error reporting every command shares.

Everything else in the daemon is below it: nothing outside this package may import it.
"""
