package telemetry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The library packages: what an application imports.
var library = []string{
	"github.com/sqllock/sqllock",
	"github.com/sqllock/sqllock/advisory",
	"github.com/sqllock/sqllock/fence",
	"github.com/sqllock/sqllock/jobguard",
	"github.com/sqllock/sqllock/migrations",
	"github.com/sqllock/sqllock/optimistic",
	"github.com/sqllock/sqllock/pgxq",
	"github.com/sqllock/sqllock/reaper",
	"github.com/sqllock/sqllock/rowlock",
	"github.com/sqllock/sqllock/tablelock",
}

// apiModules are the OpenTelemetry modules the library may pull in: the
// API, and what the API module itself needs (its global logger bridge and
// the auto-instrumentation hook of its global tracer).
var apiModules = map[string]bool{
	"go.opentelemetry.io/otel":        true,
	"go.opentelemetry.io/otel/metric": true,
	"go.opentelemetry.io/otel/trace":  true,
	"go.opentelemetry.io/otel/log":    true,
	"go.opentelemetry.io/auto/sdk":    true,
}

// TestOnlyAPIDependencies: the library depends on the OpenTelemetry API
// only; the SDK and the exporters are the application's choice.
func TestOnlyAPIDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}"}, library...)
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	sawAPI := false
	for line := range strings.Lines(string(out)) {
		pkg, mod, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case strings.HasPrefix(pkg, "go.opentelemetry.io/otel/sdk"),
			strings.HasPrefix(pkg, "go.opentelemetry.io/otel/exporters"),
			strings.HasPrefix(pkg, "github.com/prometheus/"):
			t.Errorf("library depends on %s (module %s): SDK or exporter", pkg, mod)
		case strings.HasPrefix(mod, "go.opentelemetry.io/"):
			if !apiModules[mod] {
				t.Errorf("library depends on %s from module %s, not an API module", pkg, mod)
			}
			sawAPI = sawAPI || pkg == "go.opentelemetry.io/otel/metric"
		}
	}
	if !sawAPI {
		t.Error("go.opentelemetry.io/otel/metric not among the dependencies: is the list right?")
	}
}
