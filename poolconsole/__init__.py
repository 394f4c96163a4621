"""poolconsole: a terminal console for a self-hosted, heterogeneous GPU inference pool.

cryptography 51 deprecates DSA, and asyncssh 2.24 names DSA key types in its annotations, so importing
asyncssh prints five CryptographyDeprecationWarnings on every command and around the console. They tell an
operator nothing (poolconsole offers no DSA keys), and Textual draws on stderr, so `2>/dev/null` is no way
out. The filter is set here, before any module of the package can import asyncssh, and is as narrow as it can
be: that one message, raised from asyncssh's own modules. Every other warning still shows.
"""

import warnings

__version__ = "0.1.0"

# The start of cryptography's DSA deprecation message, as asyncssh's imports trigger it.
ASYNCSSH_DSA_WARNING = r"DSA is deprecated and support will be removed"

warnings.filterwarnings("ignore", message=ASYNCSSH_DSA_WARNING, module=r"asyncssh(\.|$)")
