"""X-Ray: one web page for every Ray cluster - owner, GPU type, status, cost, dashboards, jobs,
logs and notebooks - over the local and KubeRay backends.

Modules, one job each:

* :mod:`.settings` - what ``ads-ranking xray serve`` was started with
* :mod:`.security` - loopback/bearer-token access, CSRF, Host check, security headers
* :mod:`.rows` - one table row per cluster, cost so far, filters
* :mod:`.local_source` / :mod:`.local_jobs` - local Ray clusters (state files) and their jobs
* :mod:`.kuberay_source` - managed RayClusters over the KubeRay backend's public methods
* :mod:`.notebooks` - Jupyter servers attached to local clusters
* :mod:`.forms` - the create form → a validated ClusterRequest (the CLI's validation)
* :mod:`.dagster_links` - links to the Dagster run that made a cluster
* :mod:`.service` - the sources behind one interface; :mod:`.pages`, :mod:`.api` - routes
* :mod:`.app` - the Starlette app; :mod:`.server` - uvicorn
"""
