#!/usr/bin/env bash
# A 2-node Slurm cluster on this one machine, for testing `lmforge pretrain --submit slurm` against a real
# controller (tests/integration/test_slurm_cluster.py starts it). Needs root and Debian's `slurm-wlm munge`:
#
#     apt-get install -y slurm-wlm munge
#     infra/slurm/local-cluster.sh start     # munged, slurmctld, slurmd n1 and n2; returns once both are idle
#     export SLURM_CONF=/var/spool/lmforge-slurm/slurm.conf   # (`start` prints it; also linked as
#                                                             #  /etc/slurm/slurm.conf when there is none)
#     sinfo; sbatch ...; squeue
#     infra/slurm/local-cluster.sh status    # sinfo, or exit 1 when the controller is not answering
#     infra/slurm/local-cluster.sh stop      # stops the daemons this script started (by their pid files)
#
# Both nodes are 127.0.0.1, each slurmd on its own port (`slurmd -N n1`, `-N n2`: Debian builds Slurm with
# multiple-slurmd support), with this machine's CPUs each: the two share the cores, which is fine for a test.
# No slurmdbd: accounting is off, as on many small clusters, so `sacct` answers "accounting storage is disabled"
# and the follower reads job states from `scontrol show job` (training/launch/cluster_submit.py). Jobs run as the
# submitting user; with proctrack/linuxproc and task/none no cgroup set-up is needed (it works in containers).
# Settings: LMFORGE_SLURM_DIR (state, spool, logs, config; default /var/spool/lmforge-slurm),
# LMFORGE_SLURM_PORTS (controller, n1, n2; default "6817 6821 6822").
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin  # slurmctld, slurmd, munged

DIR=${LMFORGE_SLURM_DIR:-/var/spool/lmforge-slurm}
read -r CTLD_PORT N1_PORT N2_PORT <<<"${LMFORGE_SLURM_PORTS:-6817 6821 6822}"
CONF=$DIR/slurm.conf
NODES=(n1 n2)
export SLURM_CONF=$CONF

die() { echo "local-cluster: $*" >&2; exit 1; }

need() {
  [[ $(id -u) == 0 ]] || die "run as root (slurmd starts jobs as their users)"
  for b in slurmctld slurmd munged sinfo; do
    command -v "$b" >/dev/null || die "$b not found: apt-get install -y slurm-wlm munge"
  done
}

# the daemon in pid file $1 runs (a zombie, ended but not yet reaped by its parent, does not count)
alive() {
  [[ -s $1 ]] || return 1
  local stat
  stat=$(cat "/proc/$(cat "$1")/stat" 2>/dev/null) || return 1
  [[ ${stat##*) } != Z* ]]
}

write_conf() {
  local cpus host
  cpus=$(nproc)
  host=$(hostname -s)
  mkdir -p "$DIR"/{state,log,n1,n2}
  cat >"$CONF.tmp" <<EOF
# written by infra/slurm/local-cluster.sh: two nodes on 127.0.0.1, each its own slurmd port
ClusterName=lmforge-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
# a node that went DOWN (a slurmd restarted) comes back as soon as it registers again
ReturnToService=2
SlurmdTimeout=60
KillWait=10
MinJobAge=300
NodeName=n1 NodeAddr=127.0.0.1 Port=$N1_PORT CPUs=$cpus State=UNKNOWN
NodeName=n2 NodeAddr=127.0.0.1 Port=$N2_PORT CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  mv "$CONF.tmp" "$CONF"
  # clients with no SLURM_CONF read /etc/slurm/slurm.conf: point it here unless a real one is there
  mkdir -p /etc/slurm
  if [[ ! -e /etc/slurm/slurm.conf || -L /etc/slurm/slurm.conf ]]; then ln -sfn "$CONF" /etc/slurm/slurm.conf; fi
  # node names resolve as on a cluster (MASTER_ADDR is the allocation's first node name)
  for n in "${NODES[@]}"; do
    grep -qE "^127\.0\.0\.1[[:space:]].*\b$n\b" /etc/hosts || echo "127.0.0.1 $n" >>/etc/hosts
  done
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge /etc/munge/munge.key 2>/dev/null || true
  chmod 0700 /etc/munge
  chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  if id munge >/dev/null 2>&1; then
    runuser -u munge -- munged
  else
    munged --force
  fi
  touch "$DIR/munged.started"  # so that `stop` stops it too
  for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && return; sleep 0.2; done
  die "munged did not start (see /var/log/munge/munged.log)"
}

idle_nodes() { sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle" {print $1}' | sort -u | wc -l; }

start() {
  need
  if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd-n1.pid" && alive "$DIR/slurmd-n2.pid" \
      && [[ $(idle_nodes) -ge 2 || -n $(squeue -h 2>/dev/null) ]]; then
    echo "local-cluster: already running"; echo "export SLURM_CONF=$CONF"; return
  fi
  write_conf
  start_munge
  # -c: a fresh controller (no jobs from an earlier life); -i: ignore errors reading its state
  alive "$DIR/slurmctld.pid" || slurmctld -f "$CONF" -c -i
  for n in "${NODES[@]}"; do
    alive "$DIR/slurmd-$n.pid" || slurmd -f "$CONF" -N "$n"
  done
  for _ in $(seq 120); do
    if [[ $(idle_nodes) -ge 2 ]]; then
      sinfo; echo "export SLURM_CONF=$CONF"; return
    fi
    # a node that was DOWN (killed slurmd, earlier state) is put back into service
    scontrol update nodename=n1,n2 state=resume >/dev/null 2>&1 || true
    sleep 0.5
  done
  sinfo -N -l || true
  tail -n 20 "$DIR"/log/*.log >&2 || true
  die "the nodes did not become idle within 60 s (logs in $DIR/log)"
}

stop() {
  local f
  for f in "$DIR"/slurmd-n1.pid "$DIR"/slurmd-n2.pid "$DIR"/slurmctld.pid; do
    if alive "$f"; then
      kill "$(cat "$f")"
      for _ in $(seq 50); do alive "$f" || break; sleep 0.2; done
    fi
    rm -f "$f"
  done
  [[ -L /etc/slurm/slurm.conf && $(readlink /etc/slurm/slurm.conf) == "$CONF" ]] && rm -f /etc/slurm/slurm.conf
  if [[ -e $DIR/munged.started ]] && alive /run/munge/munged.pid; then
    kill "$(cat /run/munge/munged.pid)"
  fi
  rm -f "$DIR/munged.started"
  echo "local-cluster: stopped"
}

status() {
  alive "$DIR/slurmctld.pid" || { echo "local-cluster: slurmctld not running" >&2; exit 1; }
  sinfo -N -l
  squeue
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
