import sys

from tests.langchain_suite.suite import main

sys.exit(main(sys.argv[1:]))
