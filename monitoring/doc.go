// Package monitoring holds vramscope's shipped monitoring assets, not code:
// the Grafana dashboard of a job (grafana/), Prometheus's alerting rules,
// their unit tests and scrape configurations (prometheus/), and the
// deployment recipes: systemd, a container image, Kubernetes, Slurm
// (deploy/). docs/cluster.md walks through them. Its tests check each
// asset against the exporter's metrics and against a real Prometheus.
package monitoring
