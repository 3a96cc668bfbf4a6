"""The `bsjax` command: the Battleship commands (play, paper, sweep, report, boards, bench, h2h,
lens), `serve-ollama` and `bsjax gilp ...`.

Every command checks its flags before it writes anything: bad input is one line on stderr and
exit code 2.
"""

from __future__ import annotations

import functools
import sys

from bsjax.core import checks
from bsjax.core.errors import UsageError


def cmd_serve_ollama(args) -> int:
    from bsjax.core.llm.backends import LLMError
    from bsjax.core.llm.server import serve_local_model
    checks.check_listen(args.host, args.port)  # before the model loads
    try:
        serve_local_model(args.host, args.port, verbose=args.verbose)
    except (LLMError, OSError) as err:
        raise UsageError(str(err)) from None
    return 0


def build_parser() -> checks.ArgumentParser:
    from bsjax.battleship.cli import add_commands as add_battleship_commands
    from bsjax.gilp.cli.main import add_parser as add_gilp_parser
    parser = checks.ArgumentParser(prog="bsjax", description="Noisy Collaborative Battleship in JAX")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=checks.ArgumentParser)
    add_battleship_commands(sub)
    serve = sub.add_parser("serve-ollama", help="serve the embedded local model behind the "
                           "Ollama chat API (for --llm ollama without an Ollama install); it "
                           "honours each request's format (a JSON Schema or json)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=11435)
    serve.add_argument("--verbose", action="store_true", help="show llama.cpp's own log lines")
    serve.set_defaults(func=cmd_serve_ollama)
    add_gilp_parser(sub)
    return parser


def _check_environment() -> None:
    """The environment variables bsjax reads, checked before anything runs or is written."""
    from bsjax.battleship.harness.play import compiler_options, games_per_step
    from bsjax.core.llm.backends import llm_threads
    for check in (compiler_options, functools.partial(games_per_step, "tpu"), llm_threads):
        try:
            check()
        except ValueError as err:
            raise UsageError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _check_environment()
        return args.func(args)
    except UsageError as err:
        print(f"bsjax: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("bsjax: interrupted (finished games are saved; rerun with --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
