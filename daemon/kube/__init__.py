"""The Kubernetes adapter: the only part of toposched that talks HTTP to an API server.

Owns the API client (`client`: kubernetes-asyncio's ApiClient with raw bytes in and msgspec out,
timeouts, retries, the write gate on every attempt), list+watch of every kind toposched reads
(`watch`), the implementation of the scheduling loop's `ClusterAPI` port (`cluster_api`: Binding,
Eviction, status patches), the Events (`event_correlator`: client-go's aggregation, counting and
spam filter; `event_recorder`: written in the background, bounded), the Lease (`lease_store`),
the leader election with its `WriteGate` (`leader`), and the leader's upkeep of the topology
objects' status (`topology_status`) and of the pending gang members' `PodScheduled` condition
(`pod_conditions`).

Must never import the scheduling loop's implementation (`daemon.scheduling` other than its ports),
the offline tools (`daemon.offline`) or the command line (`daemon.cli`); and nothing outside this
package may import kubernetes_asyncio, or aiohttp to reach an API server.
"""
