import tempfile, time, subprocess, signal, shutil
from pathlib import Path
from bench.benchlib import runtime_stack
from bench.peers import one_step, ROOT
from bench.profile import summarize
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
with tempfile.TemporaryDirectory() as t:
    work=Path(t)
    broker, cloud, runtime = runtime_stack(work)
    agents = DeviceAgents(broker.port, ROOT, behaviors={"speaker.say": Behavior("instant")})
    probe = MqttProbe(broker.port, [f"{ROOT}/workflow/event"])
    runtime.start(); time.sleep(0.5)
    raw=work/"raw.txt"
    rec=subprocess.Popen([".venv/bin/py-spy","record","-p",str(runtime.proc.pid),"-f","raw","-o",str(raw),"-r","500","--nonblocking"],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    time.sleep(1)
    for n in range(1000): probe.publish(f"{ROOT}/workflow/request", one_step(n))
    probe.wait_for(f"{ROOT}/workflow/event", lambda b: b.get("workflow_id")=="job-00999" and b.get("status")=="WORKFLOW_COMPLETED", timeout_s=600)
    rec.send_signal(signal.SIGINT); rec.wait(30)
    shutil.copy(raw, "/tmp/raw_jobs.txt")
    summarize(raw, 30)
    probe.close(); agents.close(); runtime.close(); cloud.stop(); broker.stop()
