test ! -e /root/cudaagent-escape-marker && test ! -e /usr/cudaagent-escape-marker
