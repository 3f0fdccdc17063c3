// Command otelcol is a tiny OpenTelemetry Collector used to test that our
// profiler's OTLP profiles are accepted by the real thing.
//
// It contains only what the tests need:
//   - the OTLP receiver (gRPC and HTTP), which accepts profiles,
//   - the debug exporter, which prints what arrives to the log,
//   - the file exporter (from collector-contrib), which writes what arrives
//     to a file, one JSON document per line;
//   - the bearer-token authenticator (from collector-contrib), so a receiver
//     can require `authorization: Bearer TOKEN` as hosted backends do
//     (config-tls.yaml).
//
// Build it with scripts/otelcol.sh. Run it with
//
//	otelcol --config config.yaml --feature-gates=+service.profilesSupport
//
// Profiles are still experimental in the Collector, so the feature gate is
// required for a "profiles" pipeline to be accepted.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/bearertokenauthextension"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// components lists every factory this Collector knows about.
func components() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{
		// The Collector refuses to start without a telemetry factory
		// (it configures the Collector's own logs and metrics).
		Telemetry: otelconftelemetry.NewFactory(),
	}
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
		otlpreceiver.NewFactory(),
	); err != nil {
		return f, err
	}
	if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](
		bearertokenauthextension.NewFactory(),
	); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		debugexporter.NewFactory(),
		fileexporter.NewFactory(),
	); err != nil {
		return f, err
	}
	return f, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "Minimal Collector for testing OTLP profiles",
			Version:     "0.165.0",
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// --config paths without a scheme are read as files, and
				// ${env:VAR} (or plain ${VAR}) in the YAML reads the environment.
				ProviderFactories: []confmap.ProviderFactory{
					fileprovider.NewFactory(),
					envprovider.NewFactory(),
				},
				DefaultScheme: "env",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
