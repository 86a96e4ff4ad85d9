"""Settings shared by every system: logging, the results database, modes, check search path."""
import fcntl
import getpass
import os

from partitions import default_prefix

PREFIX = default_prefix()
os.makedirs(PREFIX, exist_ok=True)
CHECKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'checks')


def results_db():
    """The SQLite results database. It must be on a filesystem where POSIX locks work (ReFrame
    hangs at the end of a run otherwise, reframe#3311): local disk by default, checked here."""
    path = os.environ.get('STACKPROOF_RESULTS_DB') or \
        f'/var/tmp/stackproof-{getpass.getuser()}/reframe-results.db'
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, '.stackproof-lock-probe')
    try:
        with open(probe, 'w') as fh:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fh, fcntl.LOCK_UN)
    except OSError as exc:
        raise RuntimeError(f'results database {path}: file locks do not work in {directory} ({exc}); '
                           'set STACKPROOF_RESULTS_DB to a path on local disk') from None
    return path


_GENERAL = {
    'check_search_path': [CHECKS],
    'check_search_recursive': True,
    'report_file': os.path.join(PREFIX, 'reports', 'run-report-{sessionid}.json'),
}


def _stack_mode(stack):
    return {'name': stack,
            'options': ['-p', f'^{stack}$', '-t', 'acceptance', '--exec-policy=serial',
                        '--performance-report', '--session-extras', f'stack={stack}']}


site_configuration = {
    'general': [
        # the test cluster and this machine answer squeue instantly: poll at least once a second
        # (ReFrame's default decays to once every 10 s, which made short jobs take ~10 s each)
        dict(_GENERAL, poll_rate_min=1.0, target_systems=['testcluster', 'local']),
        _GENERAL,
    ],
    'storage': [{'enable': True, 'sqlite_db_file': results_db()}],
    'modes': [
        # every stack the system defines, serially (noise and latency tests must not overlap)
        {'name': 'acceptance',
         'options': ['-t', 'acceptance', '--exec-policy=serial', '--performance-report']},
        _stack_mode('commodity'),
        _stack_mode('vendor'),
    ],
    'logging': [{
        'level': 'debug',
        'handlers': [
            {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
            {'type': 'file', 'name': os.path.join(PREFIX, 'reframe.log'), 'level': 'debug',
             'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s', 'append': False},
        ],
        'handlers_perflog': [{
            'type': 'filelog',
            'prefix': '%(check_system)s/%(check_partition)s',
            'basedir': os.path.join(PREFIX, 'perflogs'),
            'level': 'info',
            'format': ('%(check_job_completion_time)s|%(check_environ)s|%(check_display_name)s|'
                       '%(check_perf_var)s|%(check_perf_value)s|%(check_perf_ref)s|'
                       '%(check_perf_lower_thres)s|%(check_perf_upper_thres)s|%(check_perf_unit)s|'
                       '%(check_perf_result)s'),
            'format_perfvars': '',
            'append': True,
        }],
    }],
}
