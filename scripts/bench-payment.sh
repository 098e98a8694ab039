#!/usr/bin/env bash
# scripts/bench-payment.sh — the payment module's benchmarks in one run, on a
# throwaway PostgreSQL database and the test NATS (scripts/test-env.sh):
#
#   1. callback ingress, one transaction per callback (payment.callback_batch=1)
#      and group commit (200), alternating for ROUNDS rounds so both see the
#      same machine; each run prints callbacks/s, CPU per callback of the
#      process and of the database backends, and the senders' ceiling;
#   2. the ledger consuming a backlog of LEDGER_N payment events (JetStream,
#      the server embedded in the benchmark; LEDGER_NATS=machine for the
#      test NATS);
#   3. the four-way reconciler over RECON_N transactions (wall time, peak heap).
#
#   scripts/bench-payment.sh                       # defaults below
#   CALLBACKS=3000 ROUNDS=3 LEDGER_N=900000 RECON_N=1000000 scripts/bench-payment.sh
#   STEPS=ingress scripts/bench-payment.sh         # only some steps (ingress,ledger,recon)
#   DIALECT=sqlite STEPS=ingress scripts/bench-payment.sh  # the ingress on SQLite
#
# The load average is printed before each run: record it with the figures.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
	export PATH=/usr/local/go/bin:$PATH
fi
CALLBACKS=${CALLBACKS:-3000}
ROUNDS=${ROUNDS:-2}
LEDGER_N=${LEDGER_N:-50000}
RECON_N=${RECON_N:-100000}
STEPS=${STEPS:-ingress,ledger,recon}
DIALECT=${DIALECT:-postgres}

bin=$(mktemp -d)/payment.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./modules/payment/
cd modules/payment

run() { # run ENV... -- BENCH BENCHTIME
	echo "== $* | $(uptime)"
	env "$@" "$bin" -test.run '^$' -test.bench "$BENCH" -test.benchtime "$BT" -test.timeout 90m 2>&1 | grep -E '^(Benchmark|FAIL|---|panic)' || true
}
steps() {
	if [[ ,$STEPS, == *,ingress,* ]]; then
		for r in $(seq "$ROUNDS"); do
			for batch in 1 200; do
				BENCH=BenchmarkCallbackIngress BT=${CALLBACKS}x run KEEL_PAY_BENCH_BATCH=$batch KEEL_PAY_BENCH_DIALECT=$DIALECT
			done
		done
	fi
	if [[ ,$STEPS, == *,ledger,* ]]; then
		# The embedded server (2.15) has pinned consumers, so the ledger takes
		# windows; LEDGER_NATS=machine uses the test NATS (2.9 here: one
		# event per partition at a time).
		BENCH=BenchmarkLedgerConsumer BT=${LEDGER_N}x run KEEL_PAY_BENCH_BUS=jetstream \
			KEEL_PAY_BENCH_NATS=$([[ ${LEDGER_NATS:-embedded} == embedded ]] && echo embedded || echo machine)
	fi
	if [[ ,$STEPS, == *,recon,* ]]; then
		BENCH=BenchmarkReconciliation BT=1x run KEEL_PAY_BENCH_RECON_N=$RECON_N
	fi
	echo "== done | $(uptime)"
}
export -f run steps
export bin CALLBACKS ROUNDS LEDGER_N RECON_N STEPS DIALECT
"$root/scripts/test-env.sh" bash -c steps
