#!/usr/bin/env bash
# Two "hosts" on this machine, for multi-host mpirun runs without a second machine: two network
# namespaces joined by a veth pair, each with its own address and host name (a UTS namespace),
# and an sshd (Debian's openssh-server) inside the second one that mpirun reaches with a
# throw-away key. COMMAND runs on the first host with:
#   TWO_HOSTS_A, TWO_HOSTS_B   the hosts' addresses
#   TWO_HOSTS_MPI_ARGS         mpirun arguments that place SLOTS ranks on each host in order
#                              (--host A:SLOTS,B:SLOTS, ssh through the key, TCP on the veth)
# Everything is removed when COMMAND ends (or the script is interrupted).
#
#   tools/two-hosts.sh [--slots N] COMMAND [ARGS...]
#   tools/two-hosts.sh sh -c 'mpirun $TWO_HOSTS_MPI_ARGS -np 4 build/worker/worker ...'
#
# Needs root, iproute2 (ip netns), util-linux (unshare), ssh, ssh-keygen and sshd. Exit status
# 77 (with a message naming what is missing) when the hosts cannot be made here; otherwise
# COMMAND's status.
set -euo pipefail
slots=2
if [ "${1:-}" = "--slots" ]; then
  slots=$2
  shift 2
fi
if [ $# -eq 0 ]; then
  echo "usage: tools/two-hosts.sh [--slots N] COMMAND [ARGS...]" >&2
  exit 2
fi
skip() {
  echo "two-hosts.sh: cannot make two hosts here: $*" >&2
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
for tool in ip unshare ssh ssh-keygen /usr/sbin/sshd; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool is missing (Debian packages iproute2, util-linux, openssh-client, openssh-server)"
done

# Names and a /24 of their own per run, so concurrent runs do not collide.
id=$$
net="10.$((77 + id % 100)).$((id / 100 % 250)).0"
a_addr="${net%.0}.1"
b_addr="${net%.0}.2"
ns_a="llm-a-$id"
ns_b="llm-b-$id"
dir=$(mktemp -d /tmp/two-hosts.XXXXXX)
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  if [ -f "$dir/sshd.pid" ]; then kill "$(cat "$dir/sshd.pid")" 2>/dev/null || true; fi
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns_a" 2>/dev/null || skip "ip netns add failed (no CAP_SYS_ADMIN?)"
ip netns add "$ns_b"
ip link add "va$id" type veth peer name "vb$id" || skip "cannot create a veth pair"
ip link set "va$id" netns "$ns_a"
ip link set "vb$id" netns "$ns_b"
ip -n "$ns_a" addr add "$a_addr/24" dev "va$id"
ip -n "$ns_b" addr add "$b_addr/24" dev "vb$id"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "va$id" up
ip -n "$ns_b" link set "vb$id" up

# sshd on the second host, key-only, with its own host key, pid file and log.
ssh-keygen -q -t ed25519 -N '' -f "$dir/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$dir/id"
cp "$dir/id.pub" "$dir/authorized_keys"
chmod 600 "$dir/authorized_keys"
cat >"$dir/sshd_config" <<CONFIG
ListenAddress $b_addr
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
CONFIG
mkdir -p /run/sshd  # sshd's privilege-separation directory
ip netns exec "$ns_b" unshare --uts sh -c \
  "hostname hostb && exec /usr/sbin/sshd -f '$dir/sshd_config' -E '$dir/sshd.log'" ||
  skip "sshd did not start: $(cat "$dir/sshd.log" 2>/dev/null)"
cat >"$dir/ssh" <<SSH
#!/bin/sh
exec ssh -i '$dir/id' -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
  -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=10 "\$@"
SSH
chmod +x "$dir/ssh"
# sshd forks into the background: wait (bounded) until it answers.
for _ in $(seq 50); do
  if ip netns exec "$ns_a" "$dir/ssh" "$b_addr" true 2>/dev/null; then break; fi
  sleep 0.1
done
ip netns exec "$ns_a" "$dir/ssh" "$b_addr" true ||
  skip "ssh to the second host failed: $(cat "$dir/sshd.log" 2>/dev/null)"

export TWO_HOSTS_A="$a_addr" TWO_HOSTS_B="$b_addr"
export TWO_HOSTS_MPI_ARGS="--allow-run-as-root --oversubscribe --bind-to none \
--host $a_addr:$slots,$b_addr:$slots --mca plm_rsh_agent $dir/ssh \
--mca btl_tcp_if_include $net/24 --mca oob_tcp_if_include $net/24"
status=0
ip netns exec "$ns_a" unshare --uts sh -c 'hostname hosta && exec "$@"' sh "$@" || status=$?
exit "$status"
