"""Settings shared by every system: logging, the results database, modes, check search path."""
import fcntl
import os
import stat

from partitions import SiteConfigError, default_prefix

PREFIX = default_prefix()
os.makedirs(PREFIX, exist_ok=True)
CHECKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'checks')


def private_dir(directory):
    """Create `directory` mode 0700, or accept it only if it is a real directory (not a symlink)
    that this user owns and nobody else may write: results must not be readable, truncatable or
    redirectable by another local user who created the path first."""
    os.makedirs(os.path.dirname(directory), mode=0o700, exist_ok=True)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise SiteConfigError(f'{directory}: is a symlink; refusing to keep results there (remove it)')
    if not stat.S_ISDIR(st.st_mode):
        raise SiteConfigError(f'{directory}: not a directory')
    if st.st_uid != os.geteuid():
        raise SiteConfigError(f'{directory}: owned by uid {st.st_uid}, not by you (uid {os.geteuid()}); '
                           'someone else created it: use another path (STACKPROOF_RESULTS_DB)')
    if st.st_mode & 0o022:
        raise SiteConfigError(f'{directory}: writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); '
                           f'chmod 700 it or set STACKPROOF_RESULTS_DB')
    return directory


def results_db():
    """The SQLite results database, in a private directory (private_dir). It must be on a
    filesystem where POSIX locks work (ReFrame hangs at the end of a run otherwise, reframe#3311):
    by default $XDG_STATE_HOME/stackproof (~/.local/state/stackproof), checked here."""
    state = os.environ.get('XDG_STATE_HOME') or os.path.join(os.path.expanduser('~'), '.local', 'state')
    path = os.environ.get('STACKPROOF_RESULTS_DB') or os.path.join(state, 'stackproof', 'reframe-results.db')
    directory = private_dir(os.path.dirname(os.path.abspath(path)))
    if os.path.islink(path):
        raise SiteConfigError(f'results database {path}: is a symlink; refusing to write through it')
    probe = os.path.join(directory, '.stackproof-lock-probe')
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, 'w') as fh:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fh, fcntl.LOCK_UN)
    except OSError as exc:
        raise SiteConfigError(f'results database {path}: file locks do not work in {directory} ({exc}); '
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
        # (ReFrame's default decays to a slow rate that made each short job wait a poll: docs/performance.md,
        # "Measured here, cited by the code"), at most 4 times a second (each poll forks squeue on the CPUs the benchmark runs on)
        dict(_GENERAL, poll_rate_min=1.0, poll_rate_max=4.0, target_systems=['testcluster', 'local']),
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
