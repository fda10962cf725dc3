"""What the CLI subcommand modules share: the one way a subcommand reports an
error (a line on stderr, exit status 2). No argument parsing, no models."""
import sys


def fail(msg):
    """Print `cattn: error: msg` on stderr; return the exit status 2."""
    print(f"cattn: error: {msg}", file=sys.stderr)
    return 2
