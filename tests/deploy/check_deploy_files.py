#!/usr/bin/env python3
"""ctest deploy.files: every YAML file under deploy/ parses (python3-yaml; all documents of a
file), every JSON file parses, and the Kubernetes manifests have the shape their comments
promise: each object has apiVersion, kind and metadata.name; the router's probes are GET /readyz
(readiness) and GET /livez (liveness); every Service selects the labels of some pod template;
a container's `bash -c` script parses (bash -n).
With kubectl installed, `kubectl kustomize deploy/k8s` must build (offline; no schema check).
Exit 77 (ctest: skipped) when python3-yaml is not installed.
    tests/deploy/check_deploy_files.py DEPLOY_DIR
"""
import json
import pathlib
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIPPED: python3 has no yaml module (Debian package python3-yaml)")
    sys.exit(77)

deploy = pathlib.Path(sys.argv[1])
failures = []
yaml_files = sorted(p for p in deploy.rglob("*") if p.suffix in (".yaml", ".yml"))
json_files = sorted(deploy.rglob("*.json"))
docs = {}
for path in yaml_files:
    try:
        docs[path] = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as e:
        failures.append(f"{path}: {e}")
for path in json_files:
    try:
        json.loads(path.read_text())
    except ValueError as e:
        failures.append(f"{path}: {e}")

k8s = [(p, d) for p, ds in docs.items() if "k8s" in p.parts for d in ds]
if not k8s:
    failures.append(f"{deploy}/k8s: no manifests found")
pod_labels = []
for path, d in k8s:
    if not isinstance(d, dict) or not d.get("apiVersion") or not d.get("kind"):
        failures.append(f"{path}: a document without apiVersion/kind")
        continue
    if d["kind"] != "Kustomization" and not d.get("metadata", {}).get("name"):
        failures.append(f"{path}: {d['kind']} without metadata.name")
    template = d.get("spec", {}).get("template")
    if template:
        pod_labels.append(template["metadata"]["labels"])
        for c in template["spec"]["containers"]:
            if c.get("command", [])[:2] == ["/bin/bash", "-c"]:  # the script must parse
                r = subprocess.run(["bash", "-n"], input=c["args"][0], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    failures.append(f"{path}: container {c['name']}: bash -n: {r.stderr}")
            if d["metadata"]["name"] == "llmserve-router":
                ready = c.get("readinessProbe", {}).get("httpGet", {}).get("path")
                live = c.get("livenessProbe", {}).get("httpGet", {}).get("path")
                if (ready, live) != ("/readyz", "/livez"):
                    failures.append(f"{path}: router probes are {ready}, {live}; "
                                    "want /readyz and /livez")
routers = [d for _, d in k8s if isinstance(d, dict) and d.get("kind") == "Deployment"
           and d["metadata"]["name"] == "llmserve-router"]
if len(routers) != 1:
    failures.append("k8s: no Deployment llmserve-router")
for path, d in k8s:
    if isinstance(d, dict) and d.get("kind") == "Service":
        selector = d["spec"]["selector"]
        plain = {k: v for k, v in selector.items() if not k.startswith("statefulset.")}
        if not any(plain.items() <= labels.items() for labels in pod_labels):
            failures.append(f"{path}: Service {d['metadata']['name']} selects no pod template")

kustomized = "kubectl not installed: kustomization not built"
if shutil.which("kubectl"):
    r = subprocess.run(["kubectl", "kustomize", str(deploy / "k8s")], capture_output=True,
                       text=True)
    if r.returncode != 0:
        failures.append(f"kubectl kustomize {deploy / 'k8s'}: {r.stderr.strip()}")
    kustomized = f"kubectl kustomize: {len(list(yaml.safe_load_all(r.stdout)))} objects"

for f in failures:
    print("FAILED:", f)
print(f"{len(yaml_files)} YAML and {len(json_files)} JSON files under {deploy}; "
      f"{len(k8s)} Kubernetes objects; {kustomized}; {len(failures)} problem(s)")
sys.exit(1 if failures else 0)
