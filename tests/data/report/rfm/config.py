"""A two-stack ReFrame configuration for the report tests: one local partition, environments
`commodity` and `vendor` (no compilers needed), results database at $STACKPROOF_RESULTS_DB."""
import os

PREFIX = os.environ.get('STACKPROOF_RFM_PREFIX', '/tmp/stackproof-report-rfm')
os.makedirs(PREFIX, exist_ok=True)

site_configuration = {
    'systems': [{
        'name': 'reporttest', 'descr': 'report tests', 'hostnames': ['.*'],
        'prefix': PREFIX,
        'partitions': [{'name': 'cpu', 'scheduler': 'local', 'launcher': 'local',
                        'environs': ['commodity', 'vendor']}],
    }],
    'environments': [
        {'name': 'commodity', 'env_vars': [['FAKE_SCALE', '1.0']]},
        {'name': 'vendor', 'env_vars': [['FAKE_SCALE', '2.0']]},
    ],
    'storage': [{'enable': True,
                 'sqlite_db_file': os.environ.get('STACKPROOF_RESULTS_DB', '/tmp/stackproof-report-rfm.db')}],
    'general': [{'report_file': os.devnull}],
    # a log file beside the results (the skip reasons are in the JSON: the checks record skip_reason)
    'logging': [{'handlers': [
        {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
        {'type': 'file', 'level': 'info', 'format': '%(message)s', 'append': False,
         'name': os.path.join(PREFIX, 'reframe.log')}],
        'handlers_perflog': []}],
}
