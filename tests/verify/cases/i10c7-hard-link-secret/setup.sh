# A secret outside the workspace, hard-linked into kernels/ under a header's name: the snapshot
# must refuse the link, not read it with the verifier's rights.
printf 'TOPSECRET-c7-hardlink hunter2\n' >../secret.txt
ln ../secret.txt kernels/secret.h
