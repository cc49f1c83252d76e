#!/usr/bin/env bash
# Runs every Go fuzz target of the repository, one after another, each for
# FUZZTIME. The targets are found, not listed: every func FuzzX(f
# *testing.F) in a _test.go file. A failure stops the run; Go writes the
# failing input under the package's testdata/fuzz/FuzzX/, where plain
# go test runs it from then on.
#
#   make fuzz                        (every target for 1m each)
#   make fuzz FUZZTIME=10m           (longer)
#   hack/fuzz.sh -list               (the targets, one "package target" a line)
#
# Environment:
#   FUZZTIME    how long each target runs, as go test -fuzztime takes it
#               (default 1m; 1000x is a count of runs)
#   FUZZ_FLAGS  more go test flags, e.g. "-parallel 1" for one worker
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# targets prints "./<package dir> <FuzzName>" for each target, sorted.
targets() {
	git ls-files -co --exclude-standard -- '*_test.go' |
		xargs grep -H -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' |
		sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|./\1 \2|' |
		sort
}

if [[ "${1:-}" == "-list" ]]; then
	targets
	exit 0
fi

fuzztime=${FUZZTIME:-1m}
# shellcheck disable=SC2206 # FUZZ_FLAGS is a list of words.
flags=(${FUZZ_FLAGS:-})
found=0
while read -r pkg name; do
	found=$((found + 1))
	echo "== $name ($pkg), $fuzztime"
	go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "${flags[@]}" "$pkg"
done < <(targets)
if [[ $found -eq 0 ]]; then
	echo "no fuzz targets found" >&2
	exit 1
fi
