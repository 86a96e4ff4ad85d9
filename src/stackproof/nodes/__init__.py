"""Node types and what is rendered from them: slurm.conf/gres.conf/cgroup.conf, the Table III
core-specialization profiles and the corespec script's data.

One node-type description (slurm-conf/nodetypes/*.yaml) feeds Slurm, Warewulf and ReFrame; this
package owns reading, validating and rendering it.

Modules: model (NodeType: what a node type is, validated), nodetype (where one comes from: `load`,
`from_xml`, `from_host`), hwloc (hwloc XML -> NodeType), host (the live host's topology: lstopo +
MemTotal), memory (the node's memory), cli (`stackproof nodetype ...`), profiles (Table III
profiles planned for a node type), slurmconf (`stackproof slurm render`), corespec (the corespec
script's data).

May import: basics, gpus/.
"""
