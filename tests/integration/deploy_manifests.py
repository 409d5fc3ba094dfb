#!/usr/bin/python3
"""deploy_manifests.py - the Kubernetes manifest, the compose file, the
Dockerfile and .dockerignore have the properties docs/operations.md
promises, checked by parsing them (neither Docker nor Kubernetes runs
here); every docs/*.md a file under deploy/ names exists.

  deploy_manifests.py REPO_ROOT
"""
import os
import re
import sys

import yaml

root = sys.argv[1]
fails = 0


def check(cond, msg):
    global fails
    if cond:
        print("ok   " + msg)
    else:
        fails += 1
        print("FAIL " + msg)


def load_all(rel):
    with open(os.path.join(root, rel)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# ---- Kubernetes ----
docs = load_all("deploy/k8s/cairn.yaml")
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
check(all("namespace" not in d["metadata"] for d in docs),
      "k8s: no object names a namespace (applied to the current one)")
sts = by_kind.get("StatefulSet", [None])[0]
check(sts is not None, "k8s: a StatefulSet")
labels = sts["spec"]["template"]["metadata"]["labels"]
pod = sts["spec"]["template"]["spec"]
pdbs = by_kind.get("PodDisruptionBudget", [])
check(len(pdbs) == 1 and pdbs[0]["apiVersion"] == "policy/v1"
      and pdbs[0]["spec"].get("maxUnavailable") == 1
      and pdbs[0]["spec"]["selector"]["matchLabels"].items() <= labels.items(),
      "k8s: a PodDisruptionBudget (policy/v1) allowing one pod down, selecting the pods")
anti = pod.get("affinity", {}).get("podAntiAffinity", {})
req = anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
check(any(t["topologyKey"] == "kubernetes.io/hostname"
          and t["labelSelector"]["matchLabels"].items() <= labels.items() for t in req),
      "k8s: required pod anti-affinity per host")
spread = pod.get("topologySpreadConstraints", [])
check(any(s["topologyKey"] == "topology.kubernetes.io/zone" for s in spread),
      "k8s: topology spread over zones")
psc = pod.get("securityContext", {})
check(psc.get("runAsNonRoot") is True and isinstance(psc.get("runAsUser"), int)
      and psc["runAsUser"] != 0 and psc.get("fsGroup") == psc.get("runAsGroup"),
      "k8s: pod runs as a non-root uid with its fsGroup")
check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "k8s: seccomp RuntimeDefault")
c = pod["containers"][0]
csc = c.get("securityContext", {})
check(csc.get("allowPrivilegeEscalation") is False and csc.get("readOnlyRootFilesystem") is True
      and csc.get("capabilities", {}).get("drop") == ["ALL"],
      "k8s: container: no privilege escalation, read-only root, all capabilities dropped")
res = c.get("resources", {})
check("cpu" in res.get("requests", {}) and "memory" in res.get("requests", {})
      and "memory" in res.get("limits", {}), "k8s: cpu/memory requests and a memory limit")
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
for probe, path in (("startupProbe", "/health"), ("readinessProbe", "/ready"),
                    ("livenessProbe", "/health")):
    p = c.get(probe, {}).get("httpGet", {})
    check(p.get("path") == path and ports.get(p.get("port")) == 7402,
          "k8s: %s GET %s on the admin port" % (probe, path))
mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
vols = {v["name"]: v for v in pod.get("volumes", [])}
env = {e["name"]: e for e in c["env"]}
secret_file = env.get("CAIRN_CLUSTER_SECRET_FILE", {}).get("value", "")
secret_vol = vols.get(mounts.get(os.path.dirname(secret_file)), {})
check(secret_file != "" and "secretName" in secret_vol.get("secret", {}),
      "k8s: the cluster secret file comes from a Secret volume (%s)" % secret_file)
check("/var/lib/cairn" in mounts and "/tmp" in mounts,
      "k8s: writable data and /tmp volumes under the read-only root")
voters = env["CAIRN_VOTERS"]["value"]
check("$(POD_NAMESPACE)" in voters and ".default." not in voters,
      "k8s: voters name the pods' own namespace, not 'default'")
names = [e["name"] for e in c["env"]]
check(names.index("POD_NAMESPACE") < names.index("CAIRN_VOTERS"),
      "k8s: POD_NAMESPACE is defined before CAIRN_VOTERS uses it")

# ---- compose ----
compose = load_all("deploy/docker/compose.yaml")[0]
services = compose["services"]
check(len(services) == 3, "compose: three services")
for name, s in services.items():
    hc = s.get("healthcheck", {})
    check(hc.get("test", [None, None])[1:2] == ["/usr/local/bin/cairn-healthcheck"],
          "compose %s: healthcheck runs cairn-healthcheck" % name)
    published = [p.split(":") for p in s.get("ports", [])]
    check(any(p[-1] == "7402" for p in published), "compose %s: the admin port published" % name)
    check(all(len(p) == 3 and p[0] == "127.0.0.1" for p in published),
          "compose %s: ports published on 127.0.0.1 only (no authentication)" % name)
    ext = s["environment"].get("CAIRN_EXTERNAL_ADVERTISE", "")
    to_ext = [p for p in published if p[-1] == "7500"]
    check(len(to_ext) == 1 and ext == "%s:%s" % (to_ext[0][0], to_ext[0][1]),
          "compose %s: the host port published for the external client port (7500) is the "
          "address it advertises (%s)" % (name, ext))
    check(s.get("restart") == "on-failure" and s["environment"].get("CAIRN_CONFIG_ERROR_EXIT") == "0",
          "compose %s: restart on-failure, configuration errors end with status 0" % name)

# ---- Dockerfile, .dockerignore ----
with open(os.path.join(root, "deploy/docker/Dockerfile")) as f:
    dockerfile = f.read()
check(re.search(r"^HEALTHCHECK .*\n?.*CMD \[\"/usr/local/bin/cairn-healthcheck\"\]", dockerfile, re.M)
      is not None, "Dockerfile: HEALTHCHECK runs cairn-healthcheck")
check("COPY deploy/docker/healthcheck.sh /usr/local/bin/cairn-healthcheck" in dockerfile,
      "Dockerfile: installs the health check script")
user = re.search(r"^USER (\S+)", dockerfile, re.M)
check(user is not None and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", user.group(1)) is not None
      and user.group(1).split(":")[0] == str(psc.get("runAsUser")),
      "Dockerfile: USER is the numeric uid the k8s manifest runs as")
ignore_path = os.path.join(root, ".dockerignore")
ignore = open(ignore_path).read().split("\n") if os.path.exists(ignore_path) else []
check("build" in ignore and ".git" in ignore, ".dockerignore leaves out build trees and .git")

# ---- documentation the deploy files point at ----
for dirpath, _, files in os.walk(os.path.join(root, "deploy")):
    for fn in files:
        path = os.path.join(dirpath, fn)
        try:
            text = open(path).read()
        except UnicodeDecodeError:
            continue
        for ref in sorted(set(re.findall(r"docs/[A-Za-z0-9_.-]+\.md", text))):
            check(os.path.exists(os.path.join(root, ref)),
                  "%s names %s" % (os.path.relpath(path, root), ref))

if fails:
    print("%d failure(s)" % fails)
    sys.exit(1)
print("all manifest checks passed")
