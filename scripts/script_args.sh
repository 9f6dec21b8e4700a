# Sourced by the experiment and benchmark scripts: their arguments checked up front, with one
# `error:` line and exit 2 for anything else (docs/benchmarks.md, docs/results.md run them).

# The one optional argument of a script that writes into an output folder: prints the folder
# (DEFAULT when none is given). An option, a second argument or a file in the folder's place is
# an error. Usage: out=$(output_folder_arg DEFAULT "$@") || exit 2
output_folder_arg() {
  local default=$1 script
  script=$(basename "$0")
  shift
  if [ $# -gt 1 ]; then
    echo "error: $script: one argument at most, the output folder (got $#: $*)" >&2
    return 2
  fi
  case "${1:-}" in
    -*) echo "error: $script: unknown option '$1' (its one argument is the output folder, default $default)" >&2; return 2 ;;
  esac
  if [ -n "${1:-}" ] && [ -e "$1" ] && [ ! -d "$1" ]; then
    echo "error: $script: $1 is a file, not an output folder" >&2
    return 2
  fi
  echo "${1:-$default}"
}

# For a script configured by environment variables only: any argument is an error.
no_args() {
  if [ $# -gt 0 ]; then
    echo "error: $(basename "$0"): takes no arguments (got $*); it is set up by environment variables (see the comment at its top)" >&2
    return 2
  fi
}
