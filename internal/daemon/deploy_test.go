package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/xdpfw/xdpfw/internal/rules"
)

// unitCaps are the capabilities the systemd unit grants, without "CAP_".
func unitCaps(t *testing.T) (bounding, ambient []string) {
	f, err := os.Open(filepath.Join("..", "..", "deploy", "systemd", "xdpfw.service"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		var caps []string
		for _, c := range strings.Fields(v) {
			caps = append(caps, strings.TrimPrefix(c, "CAP_"))
		}
		slices.Sort(caps)
		switch k {
		case "CapabilityBoundingSet":
			bounding = caps
		case "AmbientCapabilities":
			ambient = caps
		}
	}
	return bounding, ambient
}

// TestDeployManifests: the systemd unit and the Kubernetes DaemonSet grant
// the same capabilities (test/e2e runs the daemon with exactly those), the
// DaemonSet runs in host networking with the bpffs and state from the host,
// and its ConfigMap holds a configuration and rules that parse.
func TestDeployManifests(t *testing.T) {
	bounding, ambient := unitCaps(t)
	if len(bounding) == 0 || !slices.Equal(bounding, ambient) {
		t.Fatalf("unit: bounding set %v, ambient %v: want the same, non-empty", bounding, ambient)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "xdpfw.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type container struct {
		Args            []string `yaml:"args"`
		SecurityContext struct {
			Privileged   bool `yaml:"privileged"`
			Capabilities struct {
				Drop []string `yaml:"drop"`
				Add  []string `yaml:"add"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	type doc struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Template struct {
				Spec struct {
					HostNetwork bool        `yaml:"hostNetwork"`
					Containers  []container `yaml:"containers"`
					Volumes     []struct {
						Name     string `yaml:"name"`
						HostPath *struct {
							Path string `yaml:"path"`
						} `yaml:"hostPath"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	kinds := map[string]*doc{}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	for {
		var d doc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		kinds[d.Kind] = &d
	}
	cm, ds := kinds["ConfigMap"], kinds["DaemonSet"]
	if cm == nil || ds == nil || kinds["Namespace"] == nil {
		t.Fatalf("manifest kinds: %v", kinds)
	}
	if _, err := ParseConfig("configmap:xdpfw.yaml", []byte(cm.Data["xdpfw.yaml"])); err != nil {
		t.Errorf("the ConfigMap's configuration: %v", err)
	}
	if _, err := rules.Parse("configmap:rules.conf", []byte(cm.Data["rules.conf"]), rules.ParseOptions{}); err != nil {
		t.Errorf("the ConfigMap's rules: %v", err)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork || len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet: hostNetwork %v, %d containers", spec.HostNetwork, len(spec.Containers))
	}
	c := spec.Containers[0]
	add := slices.Sorted(slices.Values(c.SecurityContext.Capabilities.Add))
	if c.SecurityContext.Privileged || !slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) || !slices.Equal(add, bounding) {
		t.Errorf("DaemonSet capabilities: privileged %v, drop %v, add %v; want unprivileged, drop ALL, add the unit's %v",
			c.SecurityContext.Privileged, c.SecurityContext.Capabilities.Drop, add, bounding)
	}
	if !slices.Equal(c.Args, []string{"daemon", "--config", "/etc/xdpfw/xdpfw.yaml"}) {
		t.Errorf("DaemonSet args %v", c.Args)
	}
	host := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			host[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounted[m.MountPath] = host[m.Name]
	}
	if mounted["/sys/fs/bpf"] != "/sys/fs/bpf" || mounted["/run/xdpfw"] != "/run/xdpfw" {
		t.Errorf("DaemonSet: the bpffs and the state dir must come from the host: %v", mounted)
	}
}
