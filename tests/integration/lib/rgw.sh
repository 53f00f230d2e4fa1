# A real S3-compatible object store for a test: Ceph's RADOS gateway from Debian's packages on a
# throwaway single-host Ceph cluster (one monitor, one OSD that keeps its objects in memory),
# started by hand in a fresh directory on free loopback ports, without authentication inside
# the cluster and with an S3 user whose keys the test makes up. Stopped and removed by rgw_stop.
#
#   rgw_start           sets RGW_DIR, RGW_URL (http://127.0.0.1:PORT), RGW_ACCESS_KEY,
#                       RGW_SECRET_KEY
#   rgw_gateway_stop    stops only the gateway (the objects stay in the OSD): an outage
#   rgw_gateway_start   starts it again on its port
#   s3 METHOD PATH [curl args...]   a request to the gateway signed with AWS Signature V4
#   rgw_stop            stops every daemon it started (gateway, OSD, monitor) and removes RGW_DIR
#
# Why the settings below: the gateway defaults to a "secure" monitor connection, which needs
# cephx, so it is told crc; the monitor's 1 s proposal interval would make the gateway's first
# start (it creates its pools one by one) take 20 s, so it is 10 ms; a pool of one OSD needs
# size 1. The daemons stop in the order gateway, OSD, monitor: a gateway whose OSD vanished
# hangs in its shutdown, an OSD whose monitor is gone waits for it.
# shellcheck shell=bash

rgw_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

rgw_start() {
  RGW_DIR="$(mktemp -d "${TMPDIR:-/tmp}/expanse-rgw.XXXXXX")"
  RGW_ACCESS_KEY="EXPANSETEST$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  RGW_SECRET_KEY="$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
  local mon_v2 mon_v1 port fsid conf="$RGW_DIR/ceph.conf" i
  mon_v2="$(rgw_free_port)" mon_v1="$(rgw_free_port)" port="$(rgw_free_port)"
  RGW_PORT="$port"
  RGW_URL="http://127.0.0.1:$port"
  fsid="$(cat /proc/sys/kernel/random/uuid)"
  mkdir -p "$RGW_DIR"/{run,log,mon,osd,rgw}
  cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_v2,v1:127.0.0.1:$mon_v1]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
run dir = $RGW_DIR/run
admin socket = $RGW_DIR/run/\$name.asok
pid file = $RGW_DIR/run/\$name.pid
log file = $RGW_DIR/log/\$name.log
mon cluster log file = $RGW_DIR/log/cluster.log
log to stderr = false
crash dir = $RGW_DIR/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
[mon]
mon data = $RGW_DIR/mon
paxos propose interval = 0.01
paxos min wait = 0.01
[osd]
osd data = $RGW_DIR/osd
osd objectstore = memstore
memstore device bytes = 1073741824
osd memory target = 268435456
osd op num shards = 1
osd op num threads per shard = 2
[client.rgw.test]
rgw data = $RGW_DIR/rgw
rgw frontends = beast endpoint=127.0.0.1:$port
rgw thread pool size = 16
ms mon client mode = crc
CONF
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_v2,v1:127.0.0.1:$mon_v1]" \
    "$RGW_DIR/monmap" >"$RGW_DIR/log/monmap.out" 2>&1 || return 1
  ceph-mon -c "$conf" --mkfs -i a --monmap "$RGW_DIR/monmap" >"$RGW_DIR/log/mon-mkfs.out" 2>&1 ||
    { cat "$RGW_DIR/log/mon-mkfs.out" >&2; return 1; }
  rgw_spawn mon ceph-mon -c "$conf" -f -i a
  for i in $(seq 1 150); do
    ceph -c "$conf" --connect-timeout 5 mon stat >/dev/null 2>&1 && break
    sleep 0.2
  done
  local osd_uuid osd_id
  osd_uuid="$(cat /proc/sys/kernel/random/uuid)"
  osd_id="$(ceph -c "$conf" --connect-timeout 10 osd new "$osd_uuid")" || { rgw_log_tail; return 1; }
  ceph-osd -c "$conf" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >"$RGW_DIR/log/osd-mkfs.out" 2>&1 ||
    { cat "$RGW_DIR/log/osd-mkfs.out" >&2; return 1; }
  rgw_spawn osd ceph-osd -c "$conf" -f -i "$osd_id"
  for i in $(seq 1 300); do
    ceph -c "$conf" --connect-timeout 5 osd stat -f json 2>/dev/null | grep -q '"num_up_osds":1' && break
    sleep 0.2
  done
  rgw_gateway_start || return 1
  radosgw-admin -c "$conf" user create --uid=expanse-test --display-name=expanse-test \
    --access-key="$RGW_ACCESS_KEY" --secret="$RGW_SECRET_KEY" >"$RGW_DIR/log/user.out" 2>&1 ||
    { cat "$RGW_DIR/log/user.out" >&2; return 1; }
}

rgw_spawn() { # NAME CMD...
  local name="$1"
  shift
  setsid "$@" >"$RGW_DIR/log/$name.out" 2>&1 </dev/null &
  echo $! >"$RGW_DIR/run/$name.test-pid"
}

rgw_log_tail() { tail -n 15 "$RGW_DIR"/log/*.out "$RGW_DIR"/log/*.log >&2 2>/dev/null || true; }

rgw_gateway_start() {
  rgw_spawn gateway radosgw -c "$RGW_DIR/ceph.conf" -f -n client.rgw.test
  local i
  for i in $(seq 1 300); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$RGW_URL/" || true)" == 200 ]] && return 0
    sleep 0.2
  done
  echo "the RADOS gateway did not answer on $RGW_URL" >&2
  rgw_log_tail
  return 1
}

# Stops one daemon by its recorded pid (SIGTERM, then SIGKILL after 5 s); a zombie counts as gone.
rgw_stop_one() {
  local f="$RGW_DIR/run/$1.test-pid" pid i
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  kill -TERM "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  for i in $(seq 1 50); do
    grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null && break
    [[ -e "/proc/$pid" ]] || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$f"
}

rgw_gateway_stop() { rgw_stop_one gateway; }

rgw_stop() {
  [[ -n "${RGW_DIR:-}" && -d "$RGW_DIR" ]] || return 0
  rgw_stop_one gateway
  rgw_stop_one osd
  rgw_stop_one mon
  rm -rf "$RGW_DIR"
}

s3() { # METHOD PATH [curl args...]
  local method="$1" path="$2"
  shift 2
  curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$RGW_ACCESS_KEY:$RGW_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X "$method" "$@" "$RGW_URL$path"
}
