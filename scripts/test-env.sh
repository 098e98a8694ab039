#!/usr/bin/env bash
# scripts/test-env.sh — make a PostgreSQL server reachable for Keel's tests and
# give them a throwaway database through KEEL_TEST_DATABASE_URL.
#
# Two ways to use it:
#
#   source scripts/test-env.sh        # in a script (or an interactive shell):
#                                     # exports KEEL_TEST_DATABASE_URL and drops
#                                     # the throwaway database when that shell exits
#   scripts/test-env.sh CMD [ARGS...] # runs CMD with KEEL_TEST_DATABASE_URL set to
#                                     # a fresh database, drops it afterwards and
#                                     # exits with CMD's status
#   scripts/test-env.sh               # only makes sure the server runs and prints it
#
# What it does, in order, stopping at the first step that succeeds:
#   1. KEEL_TEST_DATABASE_URL already set and reachable: use it as is (nothing is
#      created or dropped).
#   2. PostgreSQL answers on 127.0.0.1:$KEEL_TEST_PGPORT (default 5432).
#   3. PostgreSQL is installed but stopped: start its cluster with
#      pg_ctlcluster --skip-systemctl-redirect VER NAME start (creating cluster
#      'main' first if none is configured).
#   4. PostgreSQL is not installed: apt-get update, apt-get install postgresql,
#      then 3.
# Then it waits for pg_isready (bounded), finds a role that can log in over TCP
# without a prompt (postgres with trust auth; otherwise it creates/refreshes the
# local superuser role keel_test with password keel_test through the unix socket
# as the postgres OS user), creates keel_test_<epoch>_<random>, and exports
#   KEEL_TEST_DATABASE_URL=postgres://USER[:PASS]@127.0.0.1:PORT/keel_test_...?sslmode=disable
# It also drops throwaway databases left behind more than a day ago by runs that
# were killed (only ones named by this script and not in use).
#
# It also makes a NATS server with JetStream answer for the JetStream bus's
# tests and exports KEEL_TEST_NATS_URL (see keel_nats_ensure_server): a
# reachable KEEL_TEST_NATS_URL is used as is; else nats-server on
# 127.0.0.1:$KEEL_TEST_NATS_PORT (default 4222) is used if it answers, started
# (Debian's nats-server, -js, store /var/lib/nats-server) if it is stopped, and
# installed with apt-get first if it is missing (on another port than 4222 it
# gets its own store, /var/lib/nats-server-PORT).
#
# It also makes Mosquitto answer for the alarm module's MQTT tests and exports
# KEEL_TEST_MQTT_URL (see keel_mqtt_ensure_server): a reachable
# KEEL_TEST_MQTT_URL is used as is; else the machine's mosquitto on
# 127.0.0.1:$KEEL_TEST_MQTT_PORT (default 1883) is used if it answers, started
# (mosquitto -d -c /etc/mosquitto/mosquitto.conf) if it is stopped, and
# installed with apt-get (Debian's mosquitto) first if it is missing. Tests
# that restart a broker run one of their own on a free port.
#
# Knobs: KEEL_TEST_PGPORT (default 5432), KEEL_TEST_NATS_PORT (default 4222),
# KEEL_TEST_MQTT_PORT (default 1883), KEEL_TEST_NO_INSTALL=1 (never apt-get).
#
# The file only defines functions prefixed keel_ / _keel_ and does not change
# the shell options of a shell that sources it.

_keel_log() { printf 'test-env: %s\n' "$*" >&2; }

# _keel_now_ms prints a millisecond clock.
_keel_now_ms() { local n; n=$(date +%s%N); printf '%s\n' "$((n / 1000000))"; }

# _keel_as_root runs a command as root (directly, or through sudo -n).
_keel_as_root() {
	if [[ ${EUID:-$(id -u)} -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		_keel_log "need root for: $*"
		return 1
	fi
}

# _keel_as_postgres runs a command as the postgres OS user.
_keel_as_postgres() {
	if [[ ${EUID:-$(id -u)} -eq 0 ]]; then
		if command -v runuser >/dev/null 2>&1; then
			runuser -u postgres -- "$@"
		else
			su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
		fi
	elif [[ $(id -un) == postgres ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n -u postgres "$@"
	else
		_keel_log "need root or sudo to act as the postgres user"
		return 1
	fi
}

# keel_apt_install PKG... runs apt-get update (once per process) then installs.
keel_apt_install() {
	if [[ ${KEEL_TEST_NO_INSTALL:-} == 1 ]]; then
		_keel_log "KEEL_TEST_NO_INSTALL=1: not installing $*"
		return 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		_keel_log "apt-get not found: install $* by hand"
		return 1
	fi
	local try
	if [[ -z ${_KEEL_APT_UPDATED:-} ]]; then
		_keel_log "apt-get update"
		for try in 1 2 3; do
			if _keel_as_root env DEBIAN_FRONTEND=noninteractive \
				apt-get -o DPkg::Lock::Timeout=300 -qq update </dev/null >&2; then
				_KEEL_APT_UPDATED=1
				break
			fi
			_keel_log "apt-get update failed (try $try/3)"
			sleep 5
		done
		[[ -n ${_KEEL_APT_UPDATED:-} ]] || return 1
	fi
	_keel_log "apt-get install -y $* (output in /tmp/keel-apt-install.log)"
	if ! _keel_as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -o DPkg::Lock::Timeout=300 -y -q --no-install-recommends install "$@" \
		</dev/null >/tmp/keel-apt-install.log 2>&1; then
		tail -n 30 /tmp/keel-apt-install.log >&2
		_keel_log "apt-get install $* failed"
		return 1
	fi
}

_keel_pg_ready() {
	pg_isready -q -h 127.0.0.1 -p "$_keel_port" -t 2 >/dev/null 2>&1
}

# _keel_wait_ready waits (at most ~30 s) for the server to accept connections.
_keel_wait_ready() {
	local i
	for ((i = 0; i < 150; i++)); do
		_keel_pg_ready && return 0
		sleep 0.2
	done
	_keel_log "PostgreSQL did not become ready on 127.0.0.1:$_keel_port within 30 s"
	return 1
}

# _keel_server_installed: some PostgreSQL server binary and postgresql-common.
_keel_server_installed() {
	command -v pg_lsclusters >/dev/null 2>&1 || return 1
	compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

# keel_pg_ensure_server makes PostgreSQL answer on 127.0.0.1:$_keel_port.
keel_pg_ensure_server() {
	_keel_port=${KEEL_TEST_PGPORT:-5432}
	if command -v pg_isready >/dev/null 2>&1 && _keel_pg_ready; then
		return 0
	fi
	if ! _keel_server_installed; then
		_keel_log "PostgreSQL server not installed: installing it with apt"
		keel_apt_install postgresql || {
			_keel_log "could not install postgresql"
			return 1
		}
		# postinst may already have started it (where invoke-rc.d is allowed).
		_keel_pg_ready && return 0
	fi

	local clusters ver name port status chosen=""
	clusters=$(pg_lsclusters -h 2>/dev/null)
	if [[ -z $clusters ]]; then
		ver=$(basename "$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -n1 | xargs dirname | xargs dirname)")
		_keel_log "no PostgreSQL cluster configured: creating $ver/main on port $_keel_port"
		_keel_as_root pg_createcluster -p "$_keel_port" "$ver" main >&2 || return 1
		clusters=$(pg_lsclusters -h 2>/dev/null)
	fi
	# Prefer the cluster on the wanted port; else the first one (and its port).
	while read -r ver name port status _; do
		[[ -n $ver ]] || continue
		if [[ $port == "$_keel_port" ]]; then
			chosen="$ver $name $port $status"
			break
		fi
		[[ -n $chosen ]] || chosen="$ver $name $port $status"
	done <<<"$clusters"
	read -r ver name port status <<<"$chosen"
	if [[ $port != "$_keel_port" ]]; then
		_keel_log "no cluster on port $_keel_port; using $ver/$name on port $port"
		_keel_port=$port
	fi
	if [[ $status != online* ]]; then
		_keel_log "starting PostgreSQL cluster $ver/$name (was: $status)"
		_keel_as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start >&2 || {
			_keel_log "pg_ctlcluster $ver $name start failed; see /var/log/postgresql/postgresql-$ver-$name.log"
			return 1
		}
	fi
	_keel_wait_ready
}

# _keel_try_login USER PASS: can we run a query over TCP without a prompt?
_keel_try_login() {
	PGPASSWORD=$2 PGCONNECT_TIMEOUT=5 psql -X -w -q -A -t -h 127.0.0.1 -p "$_keel_port" \
		-U "$1" -d postgres -c 'select 1' </dev/null >/dev/null 2>&1
}

# keel_pg_ensure_login sets _keel_user/_keel_pass to a role that can log in
# over TCP and create databases.
keel_pg_ensure_login() {
	if _keel_try_login postgres ""; then
		_keel_user=postgres _keel_pass=""
		return 0
	fi
	if _keel_try_login keel_test keel_test; then
		_keel_user=keel_test _keel_pass=keel_test
		return 0
	fi
	_keel_log "role postgres cannot log in over TCP without a password; setting up role keel_test through the unix socket"
	local sql="DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'keel_test') THEN
    CREATE ROLE keel_test;
  END IF;
END \$\$;
ALTER ROLE keel_test LOGIN SUPERUSER PASSWORD 'keel_test';"
	_keel_as_postgres psql -X -q -p "$_keel_port" -v ON_ERROR_STOP=1 -d postgres -c "$sql" </dev/null >&2 || {
		_keel_log "could not reach PostgreSQL as the postgres OS user over the unix socket"
		return 1
	}
	if _keel_try_login keel_test keel_test; then
		_keel_user=keel_test _keel_pass=keel_test
		return 0
	fi
	_keel_log "role keel_test still cannot log in over TCP on 127.0.0.1:$_keel_port;"
	_keel_log "pg_hba.conf must allow 'host all all 127.0.0.1/32 scram-sha-256' (or trust)"
	return 1
}

_keel_psql_admin() {
	PGPASSWORD=$_keel_pass PGCONNECT_TIMEOUT=5 psql -X -q -A -t -w -v ON_ERROR_STOP=1 \
		-h 127.0.0.1 -p "$_keel_port" -U "$_keel_user" -d postgres "$@" </dev/null
}

# keel_test_env_cleanup drops the throwaway database (idempotent).
keel_test_env_cleanup() {
	local db=${_KEEL_TEST_DB:-}
	[[ -n $db ]] || return 0
	_KEEL_TEST_DB=""
	if _keel_psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" 2>/dev/null ||
		_keel_psql_admin -c "DROP DATABASE IF EXISTS \"$db\"" >&2; then
		_keel_log "dropped database $db"
	else
		_keel_log "WARNING: could not drop database $db"
	fi
}

# _keel_stale_sql lists this script's databases older than a day and unused
# (left behind by runs killed with SIGKILL).
_keel_stale_sql() {
	printf '%s' "SELECT d.datname FROM pg_database d
		WHERE d.datname ~ '^keel_test_[0-9]{10}_[0-9a-f]{8}\$'
		  AND split_part(d.datname, '_', 3)::bigint < $(($(date +%s) - 86400))
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)"
}

# _keel_sweep_stale NAMES drops the listed stale databases. Errors are ignored.
_keel_sweep_stale() {
	local name
	while read -r name; do
		[[ -n $name ]] || continue
		_keel_psql_admin -c "DROP DATABASE IF EXISTS \"$name\"" >/dev/null 2>&1 &&
			_keel_log "dropped stale database $name"
	done <<<"$1"
}

# _keel_add_exit_trap CMD runs CMD at exit, after any EXIT trap already set.
_keel_add_exit_trap() {
	local prev cur
	prev=$(trap -p EXIT)
	if [[ -n $prev ]]; then
		eval "cur=(${prev})" # trap -- 'cmd' EXIT
		trap -- "${cur[2]}; $1" EXIT
	else
		trap -- "$1" EXIT
	fi
	# Make Ctrl-C / SIGTERM run the EXIT trap too (not in interactive shells).
	if [[ $- != *i* ]]; then
		[[ -n $(trap -p INT) ]] || trap 'exit 130' INT
		[[ -n $(trap -p TERM) ]] || trap 'exit 143' TERM
	fi
}

# _keel_nats_info HOST PORT prints the server's INFO line (empty if none answers).
_keel_nats_info() {
	local line=""
	if { exec 7<>"/dev/tcp/$1/$2"; } 2>/dev/null; then
		IFS= read -r -t 2 line <&7 || true
		exec 7<&- 7>&-
	fi
	printf '%s' "$line"
}

# _keel_nats_url_hostport URL prints "HOST PORT" of a nats:// URL.
_keel_nats_url_hostport() {
	local hp=${1#*://}
	hp=${hp##*@}
	hp=${hp%%/*}
	hp=${hp%%,*}
	local host=${hp%:*} port=${hp##*:}
	[[ $hp == *:* ]] || port=4222
	printf '%s %s\n' "$host" "$port"
}

# keel_nats_ensure_server makes NATS with JetStream answer and exports
# KEEL_TEST_NATS_URL. Returns non-zero (after saying why) if it cannot.
keel_nats_ensure_server() {
	local host port info i
	if [[ -n ${KEEL_TEST_NATS_URL:-} ]]; then
		read -r host port <<<"$(_keel_nats_url_hostport "$KEEL_TEST_NATS_URL")"
		if [[ $(_keel_nats_info "$host" "$port") == INFO* ]]; then
			_keel_log "using KEEL_TEST_NATS_URL from the environment (reachable)"
			return 0
		fi
		_keel_log "WARNING: KEEL_TEST_NATS_URL=$KEEL_TEST_NATS_URL does not answer; using a local nats-server instead"
	fi
	port=${KEEL_TEST_NATS_PORT:-4222}
	info=$(_keel_nats_info 127.0.0.1 "$port")
	if [[ -z $info ]]; then
		if [[ ! -x /usr/sbin/nats-server ]] && ! command -v nats-server >/dev/null 2>&1; then
			_keel_log "nats-server not installed: installing Debian's nats-server with apt"
			keel_apt_install nats-server || {
				_keel_log "could not install nats-server"
				return 1
			}
			info=$(_keel_nats_info 127.0.0.1 "$port") # postinst may have started it
		fi
	fi
	if [[ -z $info ]]; then
		local bin=/usr/sbin/nats-server store=/var/lib/nats-server log=/var/log/nats-server.log
		[[ -x $bin ]] || bin=$(command -v nats-server)
		if [[ $port != 4222 ]]; then # never share a store between two servers
			store=/var/lib/nats-server-$port log=/var/log/nats-server-$port.log
		fi
		_keel_log "starting $bin on 127.0.0.1:$port with JetStream (store $store, log $log)"
		_keel_as_root mkdir -p "$store" || return 1
		_keel_as_root setsid "$bin" -a 127.0.0.1 -p "$port" -js -sd "$store" \
			-l "$log" </dev/null >/dev/null 2>&1 &
		disown 2>/dev/null || true
		for ((i = 0; i < 150; i++)); do
			info=$(_keel_nats_info 127.0.0.1 "$port")
			[[ -z $info ]] || break
			sleep 0.2
		done
		if [[ -z $info ]]; then
			_keel_log "nats-server did not answer on 127.0.0.1:$port within 30 s; see /var/log/nats-server.log"
			return 1
		fi
	fi
	if [[ $info != *'"jetstream":true'* ]]; then
		_keel_log "the NATS server on 127.0.0.1:$port runs without JetStream (restart it with -js, or set KEEL_TEST_NATS_PORT)"
		return 1
	fi
	export KEEL_TEST_NATS_URL="nats://127.0.0.1:$port"
	_keel_log "NATS JetStream ready: $KEEL_TEST_NATS_URL"
}

# _keel_tcp_open HOST PORT: does something accept connections there?
_keel_tcp_open() {
	if { exec 8<>"/dev/tcp/$1/$2"; } 2>/dev/null; then
		exec 8<&- 8>&-
		return 0
	fi
	return 1
}

# keel_mqtt_ensure_server makes Mosquitto answer and exports
# KEEL_TEST_MQTT_URL. Returns non-zero (after saying why) if it cannot.
keel_mqtt_ensure_server() {
	local port i hp
	if [[ -n ${KEEL_TEST_MQTT_URL:-} ]]; then
		hp=${KEEL_TEST_MQTT_URL#*://}
		if _keel_tcp_open "${hp%:*}" "${hp##*:}"; then
			_keel_log "using KEEL_TEST_MQTT_URL from the environment (reachable)"
			return 0
		fi
		_keel_log "WARNING: KEEL_TEST_MQTT_URL=$KEEL_TEST_MQTT_URL does not answer; using the local mosquitto instead"
	fi
	port=${KEEL_TEST_MQTT_PORT:-1883}
	if ! _keel_tcp_open 127.0.0.1 "$port"; then
		if ! command -v mosquitto >/dev/null 2>&1 && [[ ! -x /usr/sbin/mosquitto ]]; then
			_keel_log "mosquitto not installed: installing Debian's mosquitto with apt"
			keel_apt_install mosquitto || {
				_keel_log "could not install mosquitto"
				return 1
			}
		fi
	fi
	if ! _keel_tcp_open 127.0.0.1 "$port"; then
		local bin=/usr/sbin/mosquitto
		[[ -x $bin ]] || bin=$(command -v mosquitto)
		_keel_log "starting $bin -d -c /etc/mosquitto/mosquitto.conf"
		_keel_as_root mkdir -p /run/mosquitto /var/lib/mosquitto /var/log/mosquitto || true
		_keel_as_root chown mosquitto: /run/mosquitto /var/lib/mosquitto /var/log/mosquitto 2>/dev/null || true
		_keel_as_root "$bin" -d -c /etc/mosquitto/mosquitto.conf >&2 || {
			_keel_log "mosquitto did not start; see /var/log/mosquitto/mosquitto.log"
			return 1
		}
		for ((i = 0; i < 150; i++)); do
			_keel_tcp_open 127.0.0.1 "$port" && break
			sleep 0.2
		done
		if ! _keel_tcp_open 127.0.0.1 "$port"; then
			_keel_log "mosquitto did not answer on 127.0.0.1:$port within 30 s (its configuration must listen there)"
			return 1
		fi
	fi
	export KEEL_TEST_MQTT_URL="tcp://127.0.0.1:$port"
	_keel_log "Mosquitto ready: $KEEL_TEST_MQTT_URL"
}

# keel_test_env_setup [--server-only]: the whole procedure described above.
keel_test_env_setup() {
	local t0 url_ok=""
	t0=$(_keel_now_ms)
	if [[ -n ${KEEL_TEST_DATABASE_URL:-} ]]; then
		if ! command -v psql >/dev/null 2>&1; then
			_keel_log "KEEL_TEST_DATABASE_URL is set (psql not installed, cannot check it): using it"
			return 0
		fi
		if PGCONNECT_TIMEOUT=5 psql -X -w -q -A -t -d "$KEEL_TEST_DATABASE_URL" -c 'select 1' </dev/null >/dev/null 2>&1; then
			_keel_log "using KEEL_TEST_DATABASE_URL from the environment (reachable)"
			url_ok=1
		else
			_keel_log "WARNING: KEEL_TEST_DATABASE_URL is set but not reachable; setting up a local database instead"
		fi
	fi
	[[ -z $url_ok ]] || return 0

	# Fast path (server up, trust auth): one query both proves we can log in
	# and lists stale databases to drop.
	local stale=""
	_keel_port=${KEEL_TEST_PGPORT:-5432} _keel_user=postgres _keel_pass=""
	if ! command -v psql >/dev/null 2>&1 ||
		! stale=$(_keel_psql_admin -c "$(_keel_stale_sql)" 2>/dev/null); then
		keel_pg_ensure_server || return 1
		keel_pg_ensure_login || return 1
		stale=$(_keel_psql_admin -c "$(_keel_stale_sql)" 2>/dev/null) || stale=""
	fi
	if [[ ${1:-} == --server-only ]]; then
		_keel_log "PostgreSQL ready: postgres://$_keel_user@127.0.0.1:$_keel_port/ ($(($(_keel_now_ms) - t0)) ms)"
		return 0
	fi
	_keel_sweep_stale "$stale"

	local db rand auth
	rand=$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')
	db="keel_test_$(date +%s)_${rand}"
	_keel_psql_admin -c "CREATE DATABASE \"$db\"" >&2 || {
		_keel_log "could not create database $db"
		return 1
	}
	_KEEL_TEST_DB=$db
	_keel_add_exit_trap keel_test_env_cleanup
	auth=$_keel_user
	[[ -z $_keel_pass ]] || auth="$_keel_user:$_keel_pass"
	export KEEL_TEST_DATABASE_URL="postgres://$auth@127.0.0.1:$_keel_port/$db?sslmode=disable"
	_keel_log "created database $db on 127.0.0.1:$_keel_port as $_keel_user ($(($(_keel_now_ms) - t0)) ms); dropped at exit"
}

# _keel_main ARGS...: run as a program (see the top of this file).
_keel_main() {
	if [[ $# -eq 0 ]]; then
		keel_test_env_setup --server-only || return 1
		keel_nats_ensure_server || return 1
		keel_mqtt_ensure_server || return 1
		echo "source scripts/test-env.sh (or run scripts/test-env.sh CMD...) to get a throwaway database"
		return 0
	fi
	keel_test_env_setup || return 1
	keel_nats_ensure_server || return 1
	keel_mqtt_ensure_server || return 1
	"$@"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	_keel_main "$@"
	exit $? # the EXIT trap drops the database
fi
# Sourced: set up PostgreSQL now; the caller decides what a failure means
# (and calls keel_nats_ensure_server / keel_mqtt_ensure_server when it needs
# NATS / Mosquitto).
keel_test_env_setup
