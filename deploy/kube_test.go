package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// kubeFiles are the Kubernetes manifests.
func kubeFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no kubernetes/*.yaml (%v)", err)
	}
	return files
}

// kubeObj is what the checks read of a Kubernetes object.
type kubeObj struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		ClusterIP   string    `yaml:"clusterIP"`
		Selector    yaml.Node `yaml:"selector"`
		ServiceName string    `yaml:"serviceName"`
		Replicas    *int      `yaml:"replicas"`
		Ports       []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []kubeContainer `yaml:"containers"`
				Volumes    []struct {
					Name string `yaml:"name"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type kubeContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name string `yaml:"name"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *kubeProbe `yaml:"readinessProbe"`
	LivenessProbe  *kubeProbe `yaml:"livenessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type kubeProbe struct {
	GRPC *struct {
		Port int `yaml:"port"`
	} `yaml:"grpc"`
}

// workload is a Deployment's or StatefulSet's apex container, parsed.
type workload struct {
	obj      kubeObj
	where    string
	p        parsed
	listen   []int
	ports    map[string]int // container port name -> number
	replicas int
}

// checkKube checks the manifests (file name -> contents) against the
// binary and each other; it returns the problems found.
func checkKube(c *apexCLI, files map[string][]byte, exposed []int) []string {
	var probs []string
	var services []kubeObj
	var serviceWhere []string
	loads := map[string]*workload{}
	var names []string
	fileNames := make([]string, 0, len(files))
	for f := range files {
		fileNames = append(fileNames, f)
	}
	sort.Strings(fileNames)
	for _, f := range fileNames {
		dec := yaml.NewDecoder(bytes.NewReader(files[f]))
		for {
			var o kubeObj
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				probs = append(probs, fmt.Sprintf("kubernetes/%s: %v", f, err))
				break
			}
			where := fmt.Sprintf("kubernetes/%s: %s %s", f, o.Kind, o.Metadata.Name)
			switch o.Kind {
			case "Service":
				services = append(services, o)
				serviceWhere = append(serviceWhere, where)
			case "Deployment", "StatefulSet":
				w := checkWorkload(c, o, where, exposed, &probs)
				if w != nil {
					loads[o.Metadata.Name] = w
					names = append(names, o.Metadata.Name)
				}
			default:
				probs = append(probs, fmt.Sprintf("%s: kind %s is not checked by this test", where, o.Kind))
			}
		}
	}
	svcByName := map[string]kubeObj{}
	for i, s := range services {
		svcByName[s.Metadata.Name] = s
		var sel map[string]string
		if err := s.Spec.Selector.Decode(&sel); err != nil || len(sel) == 0 {
			probs = append(probs, serviceWhere[i]+": no selector")
			continue
		}
		var match []*workload
		for _, n := range names {
			if labelsMatch(sel, loads[n].obj.Spec.Template.Metadata.Labels) {
				match = append(match, loads[n])
			}
		}
		if len(match) == 0 {
			probs = append(probs, serviceWhere[i]+": its selector matches no workload")
		}
		for _, sp := range s.Spec.Ports {
			for _, w := range match {
				tp := sp.TargetPort.Value
				num, err := strconv.Atoi(tp)
				switch {
				case tp == "":
					num = sp.Port
				case err != nil:
					n, ok := w.ports[tp]
					if !ok {
						probs = append(probs, fmt.Sprintf("%s: port %s: targetPort %q names no port of %s", serviceWhere[i], sp.Name, tp, w.where))
						continue
					}
					num = n
				}
				if !slices.Contains(w.listen, num) {
					probs = append(probs, fmt.Sprintf("%s: port %s: target port %d is not a port %s listens on (%v)", serviceWhere[i], sp.Name, num, w.where, w.listen))
				}
			}
		}
	}
	bySub := map[string][]string{}
	var shards []string
	for _, n := range names {
		w := loads[n]
		bySub[w.p.sub] = append(bySub[w.p.sub], n)
		if w.p.sub == "replay" && len(w.listen) > 0 {
			for i := range w.replicas {
				shards = append(shards, net.JoinHostPort(fmt.Sprintf("%s-%d.%s", n, i, w.obj.Spec.ServiceName), strconv.Itoa(w.listen[0])))
			}
		}
	}
	// Every address dialed is a Service's port, or a StatefulSet pod's
	// stable name and a port its container listens on.
	for _, n := range names {
		w := loads[n]
		for flag, addrs := range dialed(w.p) {
			for _, a := range addrs {
				if msg := resolveKube(a, svcByName, loads); msg != "" {
					probs = append(probs, fmt.Sprintf("%s: -%s entry %s: %s", w.where, flag, a, msg))
				}
			}
		}
	}
	actorHosts := 0
	for _, n := range bySub["actor"] {
		actorHosts += loads[n].replicas
	}
	return append(probs, checkFleet("kubernetes", "workload", bySub, func(n string) parsed { return loads[n].p }, actorHosts, shards)...)
}

// resolveKube says why addr does not reach an apex server of the
// manifests ("" when it does).
func resolveKube(addr string, svcs map[string]kubeObj, loads map[string]*workload) string {
	host, port := splitHostPort(addr)
	pod, svcName, isPod := strings.Cut(host, ".")
	if !isPod {
		s, ok := svcs[host]
		if !ok {
			return "no Service " + host
		}
		for _, sp := range s.Spec.Ports {
			if sp.Port == port {
				return ""
			}
		}
		return fmt.Sprintf("Service %s has no port %d", host, port)
	}
	s, ok := svcs[svcName]
	if !ok || s.Spec.ClusterIP != "None" {
		return "no headless Service " + svcName + " (a pod's stable name needs one)"
	}
	for name, w := range loads {
		if w.obj.Kind != "StatefulSet" || w.obj.Spec.ServiceName != svcName {
			continue
		}
		idx, ok := strings.CutPrefix(pod, name+"-")
		i, err := strconv.Atoi(idx)
		if !ok || err != nil || i < 0 || i >= w.replicas {
			continue
		}
		if !slices.Contains(w.listen, port) {
			return fmt.Sprintf("StatefulSet %s listens on %v, not %d", name, w.listen, port)
		}
		return ""
	}
	return fmt.Sprintf("no pod %s of a StatefulSet governed by Service %s", pod, svcName)
}

// labelsMatch reports whether every selector label is among labels.
func labelsMatch(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkWorkload checks a Deployment's or StatefulSet's apex container:
// its command line against the binary, its declared ports against what
// it listens on and the Dockerfile exposes, its probes (native gRPC, on a
// plaintext -health-listen port), its volumes and its environment.
func checkWorkload(c *apexCLI, o kubeObj, where string, exposed []int, probs *[]string) *workload {
	cs := o.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		*probs = append(*probs, fmt.Sprintf("%s: %d containers, want the one apex container", where, len(cs)))
		return nil
	}
	ct := cs[0]
	if len(ct.Command) > 0 && !slices.Equal(ct.Command, []string{"/apex"}) {
		*probs = append(*probs, fmt.Sprintf("%s: command %q: the image's entrypoint is /apex; give its arguments as args", where, ct.Command))
	}
	w := &workload{obj: o, where: where, ports: map[string]int{}, replicas: 1}
	if o.Spec.Replicas != nil {
		w.replicas = *o.Spec.Replicas
	}
	w.p = c.check(invocation{where + " args", ct.Args}, probs)
	env := map[string]bool{}
	for _, e := range ct.Env {
		env[e.Name] = true
	}
	for _, a := range ct.Args {
		for rest := a; ; {
			i := strings.Index(rest, "$(")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], ")")
			if j < 0 {
				break
			}
			if v := rest[i+2 : i+j]; !env[v] {
				*probs = append(*probs, fmt.Sprintf("%s: argument %q uses $(%s), which the container's env does not define", where, a, v))
			}
			rest = rest[i+j:]
		}
	}
	var health []int
	w.listen, health = c.listens(w.p, where, probs)
	for _, cp := range ct.Ports {
		w.ports[cp.Name] = cp.ContainerPort
		if !slices.Contains(w.listen, cp.ContainerPort) {
			*probs = append(*probs, fmt.Sprintf("%s: containerPort %d is not a port apex %s listens on (%v)", where, cp.ContainerPort, w.p.sub, w.listen))
		}
	}
	for _, port := range w.listen {
		if !slices.Contains(exposed, port) {
			*probs = append(*probs, fmt.Sprintf("%s: listens on %d, which the Dockerfile does not EXPOSE (%v)", where, port, exposed))
		}
		if !slices.ContainsFunc(ct.Ports, func(cp struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		}) bool {
			return cp.ContainerPort == port
		}) {
			*probs = append(*probs, fmt.Sprintf("%s: listens on %d, which is not a declared containerPort", where, port))
		}
	}
	for name, pr := range map[string]*kubeProbe{"readinessProbe": ct.ReadinessProbe, "livenessProbe": ct.LivenessProbe} {
		switch {
		case pr == nil && len(w.listen) > 0:
			*probs = append(*probs, fmt.Sprintf("%s: apex %s serves but has no %s", where, w.p.sub, name))
		case pr == nil:
		case pr.GRPC == nil:
			*probs = append(*probs, fmt.Sprintf("%s: %s is not a native gRPC probe", where, name))
		case !slices.Contains(health, pr.GRPC.Port):
			*probs = append(*probs, fmt.Sprintf("%s: %s: gRPC probe on port %d, not a plaintext -health-listen port (%v): kubelet's probe can do neither mutual TLS nor tokens", where, name, pr.GRPC.Port, health))
		}
	}
	vols := map[string]bool{}
	for _, v := range o.Spec.Template.Spec.Volumes {
		vols[v.Name] = true
	}
	for _, v := range o.Spec.VolumeClaimTemplates {
		vols[v.Metadata.Name] = true
	}
	var mounts []string
	for _, m := range ct.VolumeMounts {
		if !vols[m.Name] {
			*probs = append(*probs, fmt.Sprintf("%s: volumeMount %s names no volume", where, m.Name))
		}
		mounts = append(mounts, m.MountPath)
	}
	for flag, v := range w.p.vals {
		if !strings.HasPrefix(v, "/") {
			continue
		}
		if !slices.ContainsFunc(mounts, func(m string) bool { return strings.HasPrefix(v, m+"/") || v == m }) {
			*probs = append(*probs, fmt.Sprintf("%s: -%s=%s is on no mounted volume (%v): the root file system is read-only", where, flag, v, mounts))
		}
	}
	return w
}

// TestKubernetesFlags checks the manifests against the binary.
func TestKubernetesFlags(t *testing.T) {
	c := newCLI(t, apexBinary(t))
	exposed, _ := dockerfilePorts(t)
	files := map[string][]byte{}
	for _, f := range kubeFiles(t) {
		files[filepath.Base(f)] = readFile(t, f)
	}
	for _, p := range checkKube(c, files, exposed) {
		t.Error(p)
	}
}
