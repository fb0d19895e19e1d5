#!/usr/bin/env bash
# A single-node Slurm on this machine, for the suite's Slurm tests and for trying
# hydra/launcher=slurm without a cluster. Root only; Debian's slurm-wlm and munge
# (installed when absent). Its configuration, state, spool and logs live in one folder.
#
#   eval "$(tests/slurm/local_cluster.sh start /tmp/slurm)"   # exports SLURM_CONF
#   python run_sweep.py -m hydra/launcher=slurm hydra.launcher.partition=debug ...
#   tests/slurm/local_cluster.sh stop /tmp/slurm
#
# The node is this machine (its cores and memory less 1 GiB), one partition
# `debug`, no accounting database (so `sacct` fails and submitit falls back to
# squeue), time limits honoured at Slurm's minute granularity.
set -euo pipefail

usage() { echo "usage: $0 start|stop FOLDER" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
folder=$(realpath -m "$2")
conf="$folder/slurm.conf"

fail() { echo "error: $*" >&2; exit 3; }

# slurm.conf has no quoting: a path in it is one word of plain characters
[[ "$folder" =~ ^[A-Za-z0-9_./+-]+$ ]] || fail "a Slurm folder's path must be plain characters (letters, digits, _ . / + -), got '$folder'"

stop() {
    for daemon in slurmd slurmctld; do
        pidfile="$folder/$daemon.pid"
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        rm -f "$pidfile"
    done
}

start() {
    [ "$(id -u)" -eq 0 ] || fail "a local Slurm runs its daemons as root; this is uid $(id -u)"
    if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
        { apt-get install -y -qq slurm-wlm munge || { apt-get update -qq &&
          apt-get install -y -qq slurm-wlm munge; }; } >/dev/null 2>&1 \
            || fail "could not install Debian's slurm-wlm and munge"
    fi
    # munge: Slurm's authentication, with a key only its user can read
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile /etc/munge/munge.key >/dev/null 2>&1 \
            || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge && chown munge:munge /run/munge
    if ! munge -n >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
    fi

    stop  # a cluster left in this folder by an earlier start
    # one Slurm per machine: its daemons' ports are fixed
    running=$( { pgrep -x slurmctld; pgrep -x slurmd; } | tr '\n' ' ' || true)
    if [ -n "$running" ]; then
        fail "a Slurm is already running on this machine (pids $running): stop it first"
    fi
    mkdir -p "$folder/state" "$folder/spool"
    host=$(hostname -s)
    cpus=$(nproc)
    memory=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
    cat > "$conf" <<CONF
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$folder/state
SlurmdSpoolDir=$folder/spool
SlurmctldPidFile=$folder/slurmctld.pid
SlurmdPidFile=$folder/slurmd.pid
SlurmctldLogFile=$folder/slurmctld.log
SlurmdLogFile=$folder/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=60
# Requeues in seconds, not minutes: a stopped job's processes get KillWait seconds
# before SIGKILL (default 30); a requeued job may start again after cred_expire
# seconds (default 120), which must outlast a time limit's signal delay (20 s in the
# tests): a job that starts again before its last run's end time is sent that run's
# signal at once; and the schedulers look every 5 s (default: 60 and 30).
KillWait=5
AuthInfo=cred_expire=35
SchedulerParameters=sched_interval=5,bf_interval=5
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$conf"
    slurmctld -f "$conf" || fail "slurmctld did not start (see $folder/slurmctld.log)"
    slurmd -f "$conf" || fail "slurmd did not start (see $folder/slurmd.log)"
    for _ in $(seq 120); do
        state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
        if [ "$state" = idle ]; then
            echo "export SLURM_CONF=$conf"  # plain characters: no quoting needed
            return
        fi
        sleep 0.5
    done
    fail "the node did not come up within a minute (state: ${state:-none}; see $folder)"
}

case "$action" in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
