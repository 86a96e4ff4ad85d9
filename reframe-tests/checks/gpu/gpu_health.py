"""GPU health that measures (partitions with `+gpu +cuda`), built from our source with the stack's
nvcc: per GPU a verified FP64 and FP32 FMA loop, pinned and pageable host<->device copies, a
device-to-device copy, thread migration over every allowed CPU with a live context, and a verified
copy between every ordered GPU pair. Performance variables are fractions of limits: the model's
peaks (stackproof/data/gpu_models.yaml, the one table) and the PCIe link of each GPU (recorded with
nvidia-smi in the job). References per GPU model live in references/<stack>/gpu.yaml.
Without nvcc the check is skipped with the reason; run.py then fails a GPU partition whose GPU
checks were all skipped."""
import os
import shutil

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from stackproof.errors import StackproofError
from stackproof.gpus import health as gpu_health
from stackproof.reframe.check import StackCheck

LINKS_FILE = 'gpu_links.csv'
LINKS_QUERY = 'index,pci.bus_id,pcie.link.gen.max,pcie.link.width.max'


@rfm.simple_test
class GPUHealth(StackCheck, rfm.RegressionTest):
    #: direction of each performance variable (the report never guesses it from the name)
    perf_better = {'*_gflops': 'higher', '*_gbs': 'higher', '*_fraction': 'higher'}
    #: bytes per copy, in MiB
    copy_mib = variable(int, value=256)
    #: the partition's GPU model (node type), the index of references/<stack>/gpu.yaml
    gpu_model = variable(str, value='', loggable=True)
    valid_systems = ['+gpu +cuda']
    valid_prog_environs = ['+cuda']
    sourcepath = 'gpu_health.cu'
    build_system = 'SingleSource'
    num_tasks = 1
    num_tasks_per_node = 1
    time_limit = '10m'
    reference_file = 'gpu.yaml'
    under_profile = False         # the GPUs, whatever the cores' profile
    keep_files = [LINKS_FILE]     # the PCIe links the fractions were computed against
    tags = {'acceptance', 'gpu', 'health'}

    @run_after('setup')
    def set_build(self):
        gpu = self.current_partition.select_devices('gpu')[0]
        self.num_devices = gpu.num_devices
        self.num_gpus_per_node = gpu.num_devices
        self.gpu_model = gpu.model or ''
        self.build_system.cxxflags = ['-O2'] + ([f'-arch={gpu.arch}'] if gpu.arch else [])
        self.executable_opts = [str(self.copy_mib)]
        self.prerun_cmds = [f'nvidia-smi --query-gpu={LINKS_QUERY} --format=csv,noheader > {LINKS_FILE} '
                            f'|| echo "nvidia-smi unavailable" > {LINKS_FILE}']

    @run_before('compile')
    def need_nvcc(self):
        """Skip, naming where nvcc was looked for, when the stack has no CUDA compiler."""
        if self.is_dry_run():
            return
        nvcc = self.current_environ.nvcc or 'nvcc'
        dirs = self.stack_bin_dirs
        cuda_home = os.environ.get('CUDA_HOME')
        path = os.pathsep.join(dirs + ([os.path.join(cuda_home, 'bin')] if cuda_home else [])
                               + [os.environ.get('PATH', '')])
        found = shutil.which(nvcc, path=path)
        if found is None:
            where = ', '.join(dirs + ['$CUDA_HOME/bin', 'PATH'])
            self.skip(f'{nvcc} not found (looked in {where}): '
                      f'the GPU health check needs the CUDA compiler of stack {self.stack!r}')
        self.build_system.nvcc = found    # the one found here, also when it is not on the job's PATH

    def _parsed(self):
        cache = self.__dict__.setdefault('_gpu_health', {})
        if 'out' not in cache:
            try:
                with open(self.stage_file()) as fh:
                    cache['out'] = gpu_health.parse_output(fh.read(), self.stage_file())
            except (OSError, StackproofError) as exc:
                raise SanityError(str(exc)) from None
            try:
                with open(self.stage_file(LINKS_FILE)) as fh:
                    cache['links'] = gpu_health.parse_links(fh.read())
            except OSError:
                cache['links'] = {}
        return cache['out'], cache['links']

    def figures(self):
        return gpu_health.figure_units()

    def verify(self, launch):
        out, _ = self._parsed()
        found = gpu_health.problems(out, self.num_devices)
        return sn.assert_true(not found, msg=f'{self.stage_file()}: ' + '; '.join(found))

    def measure(self, launch):
        out, links = self._parsed()
        values, notes = gpu_health.figures(out, self.gpu_model, links)
        for note in notes:
            self.logger.warning(f'{self.display_name}: {note}')
        return {name: value for name, (value, _unit) in values.items()}
