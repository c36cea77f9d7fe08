#!/bin/bash
# A check on a machine with a real NVIDIA GPU (not part of the test suite, which has none):
# what nvidia-smi and the driver's libraries show, what `ferrited --detect_gpus` finds, then
# ferrited attached to ferrite-testproject runs three tasks of a CUDA app version (plan class
# `cuda`) whose app finds its device in init_data.xml and allocates and sets 1 GiB on it
# through the CUDA driver API (python3 with ctypes), confined as every app is. It prints the
# GPU's compute processes while the tasks run, get_host_info's <coprocs>, `ferrite explain`,
# the outputs the project received and the daemon's GPU lines.
#
# Usage: tests/device/gpu_check.sh BIN_DIR   (BIN_DIR holds release ferrited, ferrite and
# ferrite-testproject; stripped they travel in about 15 MB). Needs python3 and nvidia-smi.
# The logs are copied to $OUT when it is set. Uses GUI RPC port 31416 on loopback.
set -u
D=$(readlink -f "${1:?usage: $0 BIN_DIR}")
W=/tmp/gpucheck; rm -rf $W; mkdir -p $W/client $W/server
cat > $W/gpu_app.sh <<'APP'
#!/bin/sh
# A GPU app: finds its device in init_data.xml and uses it through the CUDA driver.
exec python3 - "$@" 2>>stderr.txt <<'PY'
# A GPU app for the check: uses the device init_data.xml names through the CUDA driver API.
import ctypes, re, sys, time
xml = open("init_data.xml").read()
def tag(t):
    m = re.search(r"<%s>(.*?)</%s>" % (t, t), xml)
    return m.group(1) if m else ""
dev = int(tag("gpu_device_num") or "-1")
out = open("out", "w")
out.write("gpu_type=%s gpu_device_num=%d gpu_usage=%s ncpus=%s argv=%s\n" % (tag("gpu_type"), dev, tag("gpu_usage"), tag("ncpus"), sys.argv[1:]))
cu = ctypes.CDLL("libcuda.so.1")
def ok(r, what):
    if r != 0:
        out.write("%s failed: %d\n" % (what, r)); out.close(); sys.exit(3)
ok(cu.cuInit(0), "cuInit")
d = ctypes.c_int()
ok(cu.cuDeviceGet(ctypes.byref(d), dev), "cuDeviceGet")
name = ctypes.create_string_buffer(256)
ok(cu.cuDeviceGetName(name, 256, d), "cuDeviceGetName")
ctx = ctypes.c_void_p()
ok(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, d), "cuCtxCreate")
p = ctypes.c_uint64()
n = 1 << 30
ok(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)), "cuMemAlloc")
ok(cu.cuMemsetD8_v2(p, ctypes.c_ubyte(7), ctypes.c_size_t(n)), "cuMemsetD8")
ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
out.write("device %d: %s; 1 GiB allocated and set on it\n" % (dev, name.value.decode()))
out.flush()
time.sleep(4)
out.close()
open("boinc_finish_called", "w").write("0\n")
PY
APP
chmod +x $W/gpu_app.sh
log() { echo "== $*"; }
log "machine"; uname -r; grep PRETTY /etc/os-release; nproc
log "nvidia-smi"; nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,pci.bus_id --format=csv
log "libraries"; ldconfig -p | grep -E "libcuda\.so|libnvidia-ml|libOpenCL|nvidia-opencl" ; ls /etc/OpenCL/vendors 2>&1; echo LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
log "ferrited --detect_gpus"; timeout 120 $D/ferrited --dir $W/detect --detect_gpus | tee $W/detect.txt; echo "rc=${PIPESTATUS[0]}"
if grep -q "No usable GPUs found" $W/detect.txt; then echo "no usable GPU: nothing more to check"; exit 1; fi
log "GPU tasks"
$D/ferrite-testproject --port 0 --data $W/server --app gpu=$W/gpu_app.sh,cuda --jobs 3 --fpops-est 1e9 > $W/server.out 2> $W/server.log &
SP=$!
for i in $(seq 50); do URL=$(grep -o 'http://[^ ]*' $W/server.out | head -1); [ -n "$URL" ] && break; sleep 0.2; done
echo "project $URL"
cat > $W/client/global_prefs_override.xml <<X
<global_preferences><run_if_user_active>1</run_if_user_active><run_gpu_if_user_active>1</run_gpu_if_user_active><suspend_cpu_usage>0</suspend_cpu_usage><work_buf_min_days>0.01</work_buf_min_days><work_buf_additional_days>0.01</work_buf_additional_days></global_preferences>
X
echo pw > $W/client/gui_rpc_auth.cfg
$D/ferrited --dir $W/client --gui_rpc_port 31416 --skip_cpu_benchmarks --attach_project $URL 0123456789abcdef0123456789abcdef > $W/ferrited.out 2> $W/ferrited.log &
CP=$!
end=$((SECONDS + 150)); i=0
while [ $SECONDS -lt $end ]; do
  i=$((i + 1))
  n=$(curl -s ${URL}status | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["results_reported"])' 2>/dev/null)
  if [ $((i % 10)) = 0 ]; then echo "t=$((i/2))s reported=$n"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; fi
  [ "$n" = "3" ] && break
  sleep 0.5
done
log "GUI RPC get_host_info coprocs"; python3 - <<'PY'
import socket, re
s = socket.create_connection(("127.0.0.1", 31416))
s.sendall(b"<boinc_gui_rpc_request>\n<get_host_info/>\n</boinc_gui_rpc_request>\n\003")
buf = b""
while not buf.endswith(b"\003"):
    c = s.recv(65536)
    if not c: break
    buf += c
t = buf.decode(errors="replace")
m = re.search(r"<coprocs>.*</coprocs>", t, re.S)
print(m.group(0)[:4000] if m else t[:3000])
PY
log "ferrite explain"; $D/ferrite --passwd pw explain 2>&1 | head -40
log "ferrite tasks"; $D/ferrite --passwd pw tasks 2>&1 | head -20
kill $CP; wait $CP 2>/dev/null; kill $SP; wait $SP 2>/dev/null
log "server status"; curl -s ${URL}status 2>/dev/null | head -c 1500; echo
log "outputs"; for f in $W/server/results/*/*; do echo "$f: $(cat $f)"; done
log "ferrited log (gpu lines)"; grep -iE "gpu|nvidia|cuda|coproc|starting task|confine|error|warn" $W/ferrited.log | head -60
log "stderr"; cat $W/client/slots/*/stderr.txt 2>/dev/null | head
[ -n "${OUT:-}" ] && cp $W/ferrited.log $W/server.log "$OUT"/ 2>/dev/null
true
