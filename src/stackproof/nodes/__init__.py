"""Node types and what is rendered from them: slurm.conf/gres.conf/cgroup.conf, the Table III
core-specialization profiles and the corespec script's data.

One node-type description (slurm-conf/nodetypes/*.yaml) feeds Slurm, Warewulf and ReFrame; this
package owns reading, validating and rendering it. Imports the basics and gpus/.
"""
