#!/bin/bash
# From-scratch single-node Slurm 22.05 cluster (+ optional slurmdbd/MariaDB so that `sacct` works) on Debian bookworm, as root.
# For the `slurm` tests (tests/ablations/launchers/test_slurm.py); .ci/run calls it. Copied from the team's measured recipe
# (shared/recipes/slurm-single-node.sh): preemption sends USR2 before the kill, requeue takes seconds, not minutes.
# Idempotent: a cluster that already answers `sinfo` is left as it is.
set -euo pipefail
BASE=${SLURM_BASE:-/tmp/slurm}; ACCOUNTING=${ACCOUNTING:-1}
H=$(hostname -s)
if command -v sinfo >/dev/null 2>&1 && sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mixed|alloc'; then
  echo "slurm: a cluster is already up"; exit 0
fi
ts() { echo "[$(date +%T.%N | cut -c1-12)] $*"; }
ts "apt install"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
PKGS="slurmctld slurmd slurm-client munge"; [ "$ACCOUNTING" = 1 ] && PKGS="$PKGS slurmdbd mariadb-server"
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
ts "configure + start"
mkdir -p "$BASE"/{state,spool,log} /etc/slurm /run/munge
[ -s /etc/munge/munge.key ] || mungekey -c -k /etc/munge/munge.key     # Debian's postinst normally creates it
chown munge:munge /etc/munge/munge.key /run/munge; chmod 400 /etc/munge/munge.key
su -s /bin/sh munge -c /usr/sbin/munged          # daemonizes; pid in /run/munge/munged.pid
ACCT=""
if [ "$ACCOUNTING" = 1 ]; then
  mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
  setsid /usr/sbin/mariadbd --user=mysql --skip-log-error >"$BASE/log/mariadbd.log" 2>&1 &
  echo $! > "$BASE/mariadbd.pid"
  for i in $(seq 1 120); do mysqladmin ping >/dev/null 2>&1 && break; sleep 0.25; done
  mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
  cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$BASE/slurmdbd.pid
LogFile=$BASE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
CONF
  chmod 600 /etc/slurm/slurmdbd.conf
  /usr/sbin/slurmdbd
  ACCT="AccountingStorageType=accounting_storage/slurmdbd"
fi
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=ci
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=5
$ACCT
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool
SlurmctldPidFile=$BASE/slurmctld.pid
SlurmdPidFile=$BASE/slurmd.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobRequeue=1
ReturnToService=2
KillWait=5
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
NodeName=$H CPUs=$(nproc) RealMemory=20000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=30
PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
CONF
if [ "$ACCOUNTING" = 1 ]; then   # wait for slurmdbd before slurmctld so the cluster registers at once
  for i in $(seq 1 120); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.25; done
fi
/usr/sbin/slurmctld -i
/usr/sbin/slurmd
for i in $(seq 1 120); do sinfo -h -p debug -o %T 2>/dev/null | grep -qx idle && break; sleep 0.25; done
ts "cluster up"; sinfo
srun -N1 hostname
[ "$ACCOUNTING" = 1 ] && { sleep 1; sacct -X -o JobID,State --parsable2 | tail -1; }
ts "done"
