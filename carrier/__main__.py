from carrier.cli import main

main()
