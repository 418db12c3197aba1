#!/usr/bin/env bash
# The Docker engine the docker stage of scripts/test.sh runs its tests against.
#
#   scripts/dockerd.sh start    use the engine that answers on /var/run/docker.sock, else start
#                               Debian's dockerd (as root) with target/dockerd/daemon.json
#   scripts/dockerd.sh stop     stop the engine `start` started (never one it found running)
#   scripts/dockerd.sh restart  restart the engine `start` started (the tests' engine-restart case)
#   scripts/dockerd.sh status   exit 0 when an engine answers
#
# The engine gets no bridge and no iptables rules: the containers run with --network none, and
# nothing on the host's network changes. gVisor's runsc is registered when Debian's is present.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR="$PWD/target/dockerd"
SOCK=/var/run/docker.sock

answers() {
    command -v curl >/dev/null 2>&1 &&
        curl -s --max-time 2 --unix-socket "$SOCK" http://localhost/_ping 2>/dev/null | grep -q OK
}

wait_ready() {
    for _ in $(seq 1 120); do
        answers && return 0
        if [ -f "$DIR/pid" ] && ! kill -0 "$(cat "$DIR/pid")" 2>/dev/null; then
            break
        fi
        sleep 0.5
    done
    echo "dockerd.sh: the engine did not come up; its log:" >&2
    tail -n 30 "$DIR/dockerd.log" >&2 2>/dev/null
    return 1
}

start() {
    if answers; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "dockerd.sh: no engine answers on $SOCK and starting one needs root" >&2
        return 1
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
        echo "dockerd.sh: dockerd is not installed (Debian's docker.io)" >&2
        return 1
    fi
    mkdir -p "$DIR"
    local runtimes=''
    if [ -x /usr/bin/runsc ]; then
        # --network=none: runsc does not set up the (empty) network namespace of --network none.
        # runsc-hostinet is the egress allowlist's: Debian's runsc cannot start its own network
        # stack on Linux 6.11+ (gVisor issue 10704), so it uses the kernel's, inside the
        # container's own network namespace.
        runtimes='"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=none"]}, "runsc-hostinet": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=ptrace", "--network=host"]}},'
    fi
    cat >"$DIR/daemon.json" <<JSON
{
  $runtimes
  "iptables": false,
  "ip-masq": false,
  "bridge": "none",
  "storage-driver": "overlay2",
  "live-restore": false
}
JSON
    setsid dockerd --config-file "$DIR/daemon.json" --pidfile "$DIR/pid" >"$DIR/dockerd.log" 2>&1 </dev/null &
    echo $! >"$DIR/started"
    wait_ready
}

stop() {
    [ -f "$DIR/started" ] || return 0
    local pid
    pid="$(cat "$DIR/pid" 2>/dev/null || cat "$DIR/started")"
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null
    rm -f "$DIR/started"
    return 0
}

case "${1:-}" in
start) start ;;
stop) stop ;;
restart)
    [ -f "$DIR/started" ] || { echo "dockerd.sh: this engine was not started by dockerd.sh" >&2; exit 1; }
    stop && start ;;
status) answers ;;
*) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
