#!/usr/bin/env bash
# scripts/fuzz.sh — run every Go fuzz target in the repository for FUZZTIME each.
#
#   scripts/fuzz.sh                 # all packages, 20s per target
#   FUZZTIME=2m scripts/fuzz.sh ./keelpgx/...
#
# Targets are discovered per package with `go test -list 'Fuzz.*'`; each one is
# run alone (`go test -run '^$' -fuzz '^Name$'`), because go test fuzzes only one
# target at a time. New failing inputs land in the package's testdata/fuzz/ and
# become regression cases for the ordinary `go test` run: commit them with the
# fix. Fuzz targets that need PostgreSQL get the throwaway database of
# scripts/test-env.sh. Exits non-zero if any target failed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	export PATH=/usr/local/go/bin:$PATH
fi
fuzztime=${FUZZTIME:-20s}
patterns=("$@")
((${#patterns[@]} > 0)) || patterns=(./...)

# shellcheck source=scripts/test-env.sh
source "$root/scripts/test-env.sh" || {
	echo "fuzz: WARNING: no PostgreSQL for the fuzz targets that need it" >&2
}

mapfile -t pkgs < <(go list "${patterns[@]}")
ran=0
failures=()
for pkg in "${pkgs[@]}"; do
	# Packages without test files list nothing; a compile error is a failure.
	if ! out=$(go test -list 'Fuzz.*' "$pkg" 2>&1); then
		printf '%s\n' "$out" >&2
		failures+=("$pkg (does not build)")
		continue
	fi
	while read -r target; do
		[[ $target == Fuzz* ]] || continue
		printf '=== fuzz %s %s (%s)\n' "$pkg" "$target" "$fuzztime"
		ran=$((ran + 1))
		if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
			failures+=("$pkg $target")
		fi
	done <<<"$out"
done

printf '\n=== fuzz summary: %d target(s) run, %d failed\n' "$ran" "${#failures[@]}"
for f in "${failures[@]}"; do printf '  FAIL %s\n' "$f"; done
((${#failures[@]} == 0))
