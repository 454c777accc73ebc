package kubernetes_test

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/asterforge/aster/examples/service/settings"
	"github.com/asterforge/aster/monitor"
	"github.com/asterforge/aster/natsstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// kustomization is the part of a kustomization.yaml these manifests use.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// objects are the manifests, decoded into their API types.
type objects struct {
	namespaces   map[string]*corev1.Namespace
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
	deployments  map[string]*appsv1.Deployment
	budgets      map[string]*policyv1.PodDisruptionBudget
}

// strict decodes doc into v, refusing unknown and duplicate fields.
func strict(doc []byte, v any) error { return yaml.UnmarshalStrict(doc, v) }

// documents splits a YAML stream into its documents, without the empty
// ones (a stream that starts with ---, comments only).
func documents(b []byte) [][]byte {
	var out [][]byte
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var content bool
		for _, line := range strings.Split(doc, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				content = true
			}
		}
		if content {
			out = append(out, []byte(doc))
		}
	}
	return out
}

// load reads the kustomization and every resource it lists, each document
// decoded strictly into the type its apiVersion and kind name.
func load(t *testing.T) (kustomization, objects) {
	t.Helper()
	var k kustomization
	b, err := os.ReadFile("kustomization.yaml")
	require.NoError(t, err)
	require.NoError(t, strict(b, &k), "kustomization.yaml")
	require.Equal(t, "kustomize.config.k8s.io/v1beta1", k.APIVersion)
	require.Equal(t, "Kustomization", k.Kind)

	o := objects{
		namespaces: map[string]*corev1.Namespace{}, configMaps: map[string]*corev1.ConfigMap{},
		services: map[string]*corev1.Service{}, statefulSets: map[string]*appsv1.StatefulSet{},
		deployments: map[string]*appsv1.Deployment{}, budgets: map[string]*policyv1.PodDisruptionBudget{},
	}
	for _, file := range k.Resources {
		b, err := os.ReadFile(file)
		require.NoError(t, err, "kustomization.yaml lists %s", file)
		docs := documents(b)
		require.NotEmpty(t, docs, file)
		for i, doc := range docs {
			where := fmt.Sprintf("%s, document %d", file, i+1)
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &tm), where)
			var meta struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			require.NoError(t, yaml.Unmarshal(doc, &meta), where)
			name := meta.Metadata.Name
			require.NotEmpty(t, name, where)
			require.Empty(t, meta.Metadata.Namespace, "%s: the kustomization sets the namespace", where)
			var dst any
			switch gvk := tm.APIVersion + " " + tm.Kind; gvk {
			case "v1 Namespace":
				dst = add(t, o.namespaces, name, where)
			case "v1 ConfigMap":
				dst = add(t, o.configMaps, name, where)
			case "v1 Service":
				dst = add(t, o.services, name, where)
			case "apps/v1 StatefulSet":
				dst = add(t, o.statefulSets, name, where)
			case "apps/v1 Deployment":
				dst = add(t, o.deployments, name, where)
			case "policy/v1 PodDisruptionBudget":
				dst = add(t, o.budgets, name, where)
			default:
				t.Fatalf("%s: unexpected %s", where, gvk)
			}
			require.NoError(t, strict(doc, dst), where)
		}
	}
	return k, o
}

// add makes a new object of m's type under name, refusing a duplicate.
func add[T any](t *testing.T, m map[string]*T, name, where string) *T {
	t.Helper()
	require.NotContains(t, m, name, "%s: a second object named %s", where, name)
	v := new(T)
	m[name] = v
	return v
}

// TestEveryManifestIsApplied checks that every YAML file of the directory
// is a resource of the kustomization, except the kustomization itself and
// the alert rules (which are no Kubernetes object).
func TestEveryManifestIsApplied(t *testing.T) {
	k, _ := load(t)
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if f != "kustomization.yaml" && f != "alerts.yaml" {
			want = append(want, f)
		}
	}
	assert.ElementsMatch(t, want, k.Resources)
	require.Len(t, k.Labels, 1)
	_, o := load(t)
	assert.Contains(t, o.namespaces, k.Namespace, "the kustomization's namespace is created")
}

// selects checks that selector selects the labels lbls.
func selects(t *testing.T, what string, selector *metav1.LabelSelector, lbls map[string]string) {
	t.Helper()
	require.NotNil(t, selector, "%s: no selector", what)
	s, err := metav1.LabelSelectorAsSelector(selector)
	require.NoError(t, err, what)
	assert.False(t, s.Empty(), "%s: an empty selector selects everything", what)
	assert.True(t, s.Matches(labels.Set(lbls)), "%s: selector %s does not select %v", what, s, lbls)
}

// container returns the pod's container called name.
func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// port resolves a probe's or Service's target port against a container.
func port(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, p.StrVal)
	return 0
}

// podEnv returns a container's environment as a pod would see it: a value,
// or for a downward API field a stand-in that names the field.
func podEnv(t *testing.T, c corev1.Container, fake map[string]string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			v, ok := fake[e.ValueFrom.FieldRef.FieldPath]
			require.True(t, ok, "env %s: unexpected field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			env[e.Name] = v
		default:
			t.Fatalf("env %s: unexpected source", e.Name)
		}
	}
	return env
}

// The stand-ins of the downward API's fields.
var downward = map[string]string{
	"metadata.name": "aster-service-7d9f-x2x4z", "metadata.namespace": "aster", "spec.nodeName": "node-1",
}

// TestServiceDeployment checks the sample service's Deployment against what
// examples/service reads and serves: its settings parse from the pod's
// environment, with the pod's name as owner and its metadata; the probes
// reach the monitor's handlers on the port it listens on; the grace period
// covers settings.GracePeriod; NATS_URL names the NATS client Service.
func TestServiceDeployment(t *testing.T) {
	_, o := load(t)
	d := o.deployments["aster-service"]
	require.NotNil(t, d, "service.yaml: Deployment aster-service")
	require.NotNil(t, d.Spec.Replicas)
	assert.EqualValues(t, 3, *d.Spec.Replicas)
	pod := d.Spec.Template
	selects(t, "Deployment aster-service", d.Spec.Selector, pod.Labels)
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		selects(t, "topology spread", tsc.LabelSelector, pod.Labels)
	}
	pdb := o.budgets["aster-service"]
	require.NotNil(t, pdb)
	selects(t, "PodDisruptionBudget aster-service", pdb.Spec.Selector, pod.Labels)
	require.NotNil(t, pdb.Spec.MaxUnavailable)
	assert.Less(t, pdb.Spec.MaxUnavailable.IntValue(), int(*d.Spec.Replicas))

	c := container(t, pod.Spec, "service")
	env := podEnv(t, c, downward)
	s, err := settings.Parse(c.Args, func(k string) string { return env[k] }, func() (string, error) { return "ignored", nil },
		&bytes.Buffer{})
	require.NoError(t, err, "the service's settings in service.yaml")

	// Identity and metadata from the pod.
	assert.Equal(t, downward["metadata.name"], s.Lease.OwnerID, "the owner is the pod's name")
	assert.Equal(t, downward["metadata.name"], s.Instance)
	assert.Equal(t, map[string]string{
		settings.MetaPod: downward["metadata.name"], settings.MetaNamespace: downward["metadata.namespace"],
		settings.MetaNode: downward["spec.nodeName"],
	}, s.Meta)

	// Probes: the monitor's handlers, on the port the service listens on.
	_, httpPort, err := net.SplitHostPort(s.HTTPAddr)
	require.NoError(t, err)
	listens, err := strconv.Atoi(httpPort)
	require.NoError(t, err)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", c.StartupProbe, settings.LivePath},
		{"livenessProbe", c.LivenessProbe, settings.LivePath},
		{"readinessProbe", c.ReadinessProbe, settings.ReadyPath},
	} {
		require.NotNil(t, p.probe, p.name)
		require.NotNil(t, p.probe.HTTPGet, "%s: an HTTP probe", p.name)
		assert.Equal(t, p.path, p.probe.HTTPGet.Path, p.name)
		assert.EqualValues(t, listens, port(t, c, p.probe.HTTPGet.Port), "%s: the port the service listens on", p.name)
	}
	// The startup probe outlasts the service's wait for NATS (30 s).
	assert.Greater(t, c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold, int32(30))
	// Liveness fails only after several misses, and after readiness.
	assert.GreaterOrEqual(t, c.LivenessProbe.PeriodSeconds*c.LivenessProbe.FailureThreshold,
		c.ReadinessProbe.PeriodSeconds*c.ReadinessProbe.FailureThreshold)
	assert.Equal(t, strconv.Itoa(listens), pod.Annotations["prometheus.io/port"])
	assert.Equal(t, settings.MetricsPath, pod.Annotations["prometheus.io/path"])

	// The grace period covers an instance's stop.
	require.NotNil(t, pod.Spec.TerminationGracePeriodSeconds)
	need := int64(math.Ceil(settings.GracePeriod(s.Lease).Seconds()))
	assert.GreaterOrEqual(t, *pod.Spec.TerminationGracePeriodSeconds, need,
		"terminationGracePeriodSeconds must cover settings.GracePeriod = %v", settings.GracePeriod(s.Lease))
	assert.Less(t, *pod.Spec.TerminationGracePeriodSeconds, need+30, "a grace period far above what a stop takes delays rollouts")

	// NATS: the client Service of nats.yaml, and a bucket of three replicas.
	require.NotEmpty(t, s.NATSURLs, "NATS_URL: the embedded server is for trying it on one machine")
	svc := o.services["nats"]
	require.NotNil(t, svc, "nats.yaml: Service nats")
	sts := o.statefulSets["nats"]
	require.NotNil(t, sts)
	natsContainer := container(t, sts.Spec.Template.Spec, "nats")
	for _, raw := range s.NATSURLs {
		u, err := url.Parse(raw)
		require.NoError(t, err, raw)
		assert.Equal(t, "nats", u.Scheme, raw)
		host := strings.TrimSuffix(u.Hostname(), ".svc.cluster.local")
		assert.Contains(t, []string{svc.Name, svc.Name + "." + downward["metadata.namespace"], svc.Name + "." +
			downward["metadata.namespace"] + ".svc"}, host, "%s names the NATS Service", raw)
		var found bool
		for _, p := range svc.Spec.Ports {
			if strconv.Itoa(int(p.Port)) == u.Port() {
				found = true
				assert.EqualValues(t, 4222, port(t, natsContainer, p.TargetPort), "%s reaches the client port", raw)
			}
		}
		assert.True(t, found, "%s: Service %s has no port %s", raw, svc.Name, u.Port())
	}
	assert.Equal(t, int(*sts.Spec.Replicas), s.Replicas, "the bucket's replicas: one per NATS server")

	// Runs as the Dockerfile's user, on a read-only root.
	require.NotNil(t, pod.Spec.SecurityContext)
	require.NotNil(t, pod.Spec.SecurityContext.RunAsUser)
	docker, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	assert.Contains(t, string(docker), fmt.Sprintf("USER %d:", *pod.Spec.SecurityContext.RunAsUser))
	assert.Contains(t, string(docker), fmt.Sprintf("EXPOSE %d", listens))
	assert.Contains(t, string(docker), "go build -trimpath -ldflags='-s -w' -o /out/service ./examples/service")
	_, err = os.Stat("../../examples/service/main.go")
	require.NoError(t, err, "the Dockerfile builds examples/service")
}

// TestNATS checks the NATS cluster: three servers in a StatefulSet with
// JetStream on their own volumes, routes to each other through the
// headless Service, and a configuration nats-server parses.
func TestNATS(t *testing.T) {
	_, o := load(t)
	sts := o.statefulSets["nats"]
	require.NotNil(t, sts, "nats.yaml: StatefulSet nats")
	require.NotNil(t, sts.Spec.Replicas)
	replicas := int(*sts.Spec.Replicas)
	assert.Equal(t, 3, replicas, "R3: three servers")
	pod := sts.Spec.Template
	selects(t, "StatefulSet nats", sts.Spec.Selector, pod.Labels)
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		selects(t, "topology spread", tsc.LabelSelector, pod.Labels)
	}
	pdb := o.budgets["nats"]
	require.NotNil(t, pdb)
	selects(t, "PodDisruptionBudget nats", pdb.Spec.Selector, pod.Labels)
	require.NotNil(t, pdb.Spec.MaxUnavailable)
	assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), "two of three keep the quorum")

	headless := o.services[sts.Spec.ServiceName]
	require.NotNil(t, headless, "the StatefulSet's serviceName %q", sts.Spec.ServiceName)
	assert.Equal(t, corev1.ClusterIPNone, headless.Spec.ClusterIP, "a headless Service")
	assert.True(t, headless.Spec.PublishNotReadyAddresses, "servers find each other before they are ready")
	client := o.services["nats"]
	require.NotNil(t, client)
	c := container(t, pod.Spec, "nats")
	for _, svc := range []*corev1.Service{headless, client} {
		assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)),
			"Service %s selects the servers", svc.Name)
		for _, p := range svc.Spec.Ports {
			assert.NotZero(t, port(t, c, p.TargetPort), "Service %s port %s", svc.Name, p.Name)
		}
	}
	svcPort := func(svc *corev1.Service, name string) int32 {
		for _, p := range svc.Spec.Ports {
			if p.Name == name {
				return p.Port
			}
		}
		t.Fatalf("Service %s has no port %s", svc.Name, name)
		return 0
	}

	// The configuration, as nats-server reads it.
	require.GreaterOrEqual(t, len(c.Args), 2)
	require.Equal(t, "--config", c.Args[0])
	dir, file := filepath.Split(c.Args[1])
	mounts := map[string]string{} // volume by mount path
	for _, m := range c.VolumeMounts {
		mounts[filepath.Clean(m.MountPath)] = m.Name
	}
	var cm *corev1.ConfigMap
	for _, v := range pod.Spec.Volumes {
		if v.Name == mounts[filepath.Clean(dir)] {
			require.NotNil(t, v.ConfigMap, "volume %s", v.Name)
			cm = o.configMaps[v.ConfigMap.Name]
		}
	}
	require.NotNil(t, cm, "the ConfigMap mounted at %s", dir)
	text, ok := cm.Data[file]
	require.True(t, ok, "ConfigMap %s has no %s", cm.Name, file)
	env := podEnv(t, c, map[string]string{"metadata.name": "nats-0"})
	require.Equal(t, "$(POD_NAME)", env["SERVER_NAME"])
	t.Setenv("SERVER_NAME", "nats-0") // $SERVER_NAME in the file
	cfg, err := conf.Parse(text)
	require.NoError(t, err, "nats.conf")

	assert.EqualValues(t, port(t, c, intstr.FromString("nats")), cfg["port"])
	assert.EqualValues(t, port(t, c, intstr.FromString("monitor")), cfg["http_port"])
	assert.Equal(t, "nats-0", cfg["server_name"])
	js, ok := cfg["jetstream"].(map[string]any)
	require.True(t, ok, "JetStream is enabled")
	storeDir, _ := js["store_dir"].(string)
	var claims []string
	for _, vct := range sts.Spec.VolumeClaimTemplates {
		claims = append(claims, vct.Name)
		assert.Contains(t, vct.Spec.AccessModes, corev1.ReadWriteOnce)
		assert.False(t, vct.Spec.Resources.Requests.Storage().IsZero(), "claim %s has a size", vct.Name)
	}
	assert.Contains(t, claims, mounts[filepath.Clean(storeDir)], "JetStream's store_dir %s is on a persistent volume", storeDir)
	assert.NotZero(t, js["max_file_store"], "file storage")

	cluster, ok := cfg["cluster"].(map[string]any)
	require.True(t, ok, "clustered")
	assert.EqualValues(t, port(t, c, intstr.FromString("cluster")), cluster["port"])
	var routes []string
	for _, r := range cluster["routes"].([]any) {
		routes = append(routes, r.(string))
	}
	var want []string
	for i := range replicas {
		want = append(want, fmt.Sprintf("nats://%s-%d.%s:%d", sts.Name, i, headless.Name, svcPort(headless, "cluster")))
	}
	assert.Equal(t, want, routes, "a route to every server, through the headless Service")

	// Lame duck on stop, with the pid file the config names; the grace
	// period outlasts lame_duck_duration.
	pid, _ := cfg["pid_file"].(string)
	assert.Contains(t, mounts, filepath.Dir(pid), "the pid file %s is on a volume", pid)
	require.NotNil(t, c.Lifecycle)
	require.NotNil(t, c.Lifecycle.PreStop)
	require.NotNil(t, c.Lifecycle.PreStop.Exec)
	assert.Equal(t, []string{"nats-server", "-sl=ldm=" + pid}, c.Lifecycle.PreStop.Exec.Command)
	ldm, err := time.ParseDuration(cfg["lame_duck_duration"].(string))
	require.NoError(t, err)
	require.NotNil(t, pod.Spec.TerminationGracePeriodSeconds)
	assert.Greater(t, time.Duration(*pod.Spec.TerminationGracePeriodSeconds)*time.Second, ldm)

	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, name)
		assert.True(t, strings.HasPrefix(p.HTTPGet.Path, "/healthz"), name)
		assert.EqualValues(t, cfg["http_port"], port(t, c, p.HTTPGet.Port), name)
	}

	// A server with per-message TTLs: 2.11 or later.
	image := c.Image
	tag := image[strings.LastIndex(image, ":")+1:]
	var major, minor int
	_, err = fmt.Sscanf(tag, "%d.%d", &major, &minor)
	require.NoError(t, err, "image %s: a versioned tag", image)
	assert.True(t, major > 2 || major == 2 && minor >= 11, "nats-server %s: 2.11 or later", tag)
}

// rules is a Prometheus rules file.
type rules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// metricNames are the Prometheus names of Aster's instruments that the
// alerts may use, as OpenTelemetry's Prometheus exporter writes them.
func metricNames() map[string]bool {
	out := map[string]bool{}
	prom := func(name string) string { return strings.ReplaceAll(name, ".", "_") }
	for _, counter := range []string{
		// actors (docs/operations.md, "Metrics"), unexported there.
		"aster.lease.acquisitions", "aster.lease.handovers", "aster.lease.renewals", "aster.lease.renewal_failures",
		"aster.lease.losses", "aster.lease.resumptions",
		monitor.MetricRestarts, monitor.MetricStoreEvents,
	} {
		out[prom(counter)+"_total"] = true
	}
	for _, gauge := range []string{"aster.lease.leader", monitor.MetricChildren} {
		out[prom(gauge)] = true
	}
	for _, histogram := range []string{"aster.lease.validity_remaining", "aster.lease.acquire_latency"} {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			out[prom(histogram)+"_seconds"+suffix] = true
		}
	}
	return out
}

// eventKinds are the kind attributes of aster.store.events: natsstore's
// event types, as monitor.Registry.StoreEvent names them.
var eventKinds = func() map[string]bool {
	out := map[string]bool{}
	for _, ev := range []natsstore.Event{
		natsstore.KeyVanished{}, natsstore.CorruptKey{}, natsstore.BucketUnusable{}, natsstore.SequenceRegression{},
		natsstore.StaleRead{}, natsstore.ServerIsolated{}, natsstore.AuthenticationFailed{},
		natsstore.AuthenticationRecovered{}, natsstore.WatchStalled{}, natsstore.BucketCreated{},
	} {
		out[fmt.Sprintf("%T", ev)] = true
	}
	return out
}()

// anchors returns the anchors of a Markdown file's headings, as GitHub
// makes them.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]bool{}
	drop := regexp.MustCompile("[^a-z0-9 _-]")
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		out[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// TestAlertRules checks alerts.yaml: a Prometheus rules file whose alerts
// read metrics Aster exports, with store event kinds natsstore reports,
// and name a runbook in docs/operations.md.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile("alerts.yaml")
	require.NoError(t, err)
	var r rules
	require.NoError(t, strict(b, &r), "alerts.yaml")
	require.NotEmpty(t, r.Groups)
	names, docs := metricNames(), anchors(t, "../../docs/operations.md")
	metric := regexp.MustCompile(`\baster_[a-z_]+`)
	kind := regexp.MustCompile(`kind=~?"([^"]+)"`)
	var alerts []string
	for _, g := range r.Groups {
		require.NotEmpty(t, g.Rules, g.Name)
		for _, rule := range g.Rules {
			require.NotEmpty(t, rule.Alert, "group %s: a recording rule?", g.Name)
			assert.NotContains(t, alerts, rule.Alert, "two alerts named %s", rule.Alert)
			alerts = append(alerts, rule.Alert)
			used := metric.FindAllString(rule.Expr, -1)
			assert.NotEmpty(t, used, "%s reads no Aster metric", rule.Alert)
			for _, m := range used {
				assert.True(t, names[m], "%s: %s is not a metric Aster exports", rule.Alert, m)
			}
			for _, k := range kind.FindAllStringSubmatch(rule.Expr, -1) {
				for _, alt := range strings.Split(k[1], "|") {
					assert.True(t, eventKinds[alt], "%s: %s is not a natsstore event", rule.Alert, alt)
				}
			}
			assert.Equal(t, strings.Count(rule.Expr, "("), strings.Count(rule.Expr, ")"), "%s: parentheses", rule.Alert)
			if rule.For != "" {
				_, err := time.ParseDuration(rule.For)
				assert.NoError(t, err, rule.Alert)
			}
			assert.Contains(t, []string{"critical", "warning", "info"}, rule.Labels["severity"], rule.Alert)
			assert.NotEmpty(t, rule.Annotations["summary"], rule.Alert)
			runbook, ok := strings.CutPrefix(rule.Annotations["runbook"], "docs/operations.md#")
			require.True(t, ok, "%s: runbook %q is not in docs/operations.md", rule.Alert, rule.Annotations["runbook"])
			assert.True(t, docs[runbook], "%s: docs/operations.md has no section #%s", rule.Alert, runbook)
		}
	}
	// The runbooks each of these alerts leads to.
	for _, want := range []string{"AsterLeaseKeyVanished", "AsterLeaseKeyCorrupt", "AsterStoreStopped",
		"AsterLeaseRenewalsFailing", "AsterNATSCredentialsRefused", "AsterLeaseHasNoHolder"} {
		assert.True(t, slices.Contains(alerts, want), "no alert %s", want)
	}
}
