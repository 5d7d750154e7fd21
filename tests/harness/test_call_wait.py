"""share/harness/call_wait.py: a spinning receive gets what a blocking one gets, falls back to
blocking (with the socket's timeout) after its spin, and leaves the socket's timeout as it was."""

import os
import socket
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "harness"))
import call_wait  # noqa: E402


class ReceiveTest(unittest.TestCase):
    def setUp(self):
        self.a, self.b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def tearDown(self):
        self.a.close()
        self.b.close()

    def test_a_waiting_message_comes_back_whole_with_or_without_spin(self):
        for spin in (0.0, 0.05):
            self.a.send(b'{"cmd": "call"}')
            self.assertEqual(call_wait.receive(self.b, 1 << 16, spin), b'{"cmd": "call"}')

    def test_a_message_sent_during_the_spin_is_received(self):
        sender = threading.Timer(0.01, lambda: self.a.send(b"late"))
        sender.start()
        self.assertEqual(call_wait.receive(self.b, 1 << 16, 5.0), b"late")
        sender.join()

    def test_after_the_spin_it_blocks_until_the_message_comes(self):
        sender = threading.Timer(0.2, lambda: self.a.send(b"after"))
        sender.start()
        self.assertEqual(call_wait.receive(self.b, 1 << 16, 0.01), b"after")
        sender.join()

    def test_the_sockets_timeout_still_applies_and_is_restored(self):
        self.b.settimeout(0.1)
        with self.assertRaises(socket.timeout):
            call_wait.receive(self.b, 1 << 16, 0.01)
        self.assertEqual(self.b.gettimeout(), 0.1)
        self.b.settimeout(None)
        self.a.send(b"x")
        call_wait.receive(self.b, 1 << 16, 0.01)
        self.assertIsNone(self.b.gettimeout())

    def test_a_closed_peer_reads_as_the_end(self):
        self.a.close()
        self.assertEqual(call_wait.receive(self.b, 1 << 16, 0.01), b"")


if __name__ == "__main__":
    unittest.main()
