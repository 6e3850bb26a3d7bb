"""What every lab emulator shares, in one place so a new platform's emulator needs nothing of another's.

``emulator`` (the command-line contract, ports, shutdown, how a process imports ``lab``), ``tls``,
``registry`` (what labctl starts), ``artifacts`` (the HTTP server BMCs fetch images from) and
``reference`` (where the platforms' own documents live). See docs/lab/index.md.
"""
