#!/usr/bin/env bash
# Fails when git tracks an executable binary (ELF, Mach-O or PE): build
# outputs belong in bin/, which is ignored. Run by `make vet`.
set -euo pipefail
# Bytes of a file as hex; empty past its end.
hex() { { od -An -tx1 -j "$2" -N "$3" "$1" 2>/dev/null || true; } | tr -d ' \n'; }
found=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  kind=
  case "$(hex "$f" 0 4)" in
    7f454c46) kind=ELF ;;
    cffaedfe|cefaedfe|feedface|feedfacf|cafebabe) kind=Mach-O ;;
    4d5a*) # "MZ": a PE file also has "PE\0\0" at the offset stored at 0x3c.
      off=$({ od -An -tu4 -j 60 -N 4 "$f" 2>/dev/null || true; } | tr -d ' ')
      [ -n "$off" ] && [ "$(hex "$f" "$off" 4)" = 50450000 ] && kind=PE ;;
  esac
  if [ -n "$kind" ]; then
    echo "tracked $kind executable: $f (git rm --cached it; build into bin/)" >&2
    found=1
  fi
done < <(git ls-files -z)
exit $found
